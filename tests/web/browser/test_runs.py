"""The runs table: the CSV download matches the API, headers sort, pages page."""

from __future__ import annotations

import csv
import io
import json

import pytest
from playwright.sync_api import expect

from tests.fixtures.browser import RANKER, number

pytestmark = pytest.mark.browser

COLUMNS = ["Run", "Started", "Variant", "Workers", "GPU-hours", "Utilization"]


def api_runs(live_server, pipeline: str = RANKER) -> list[dict]:
    with live_server.api() as client:
        r = client.get("/api/v1/runs", params={"pipeline": pipeline, "limit": 1000})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["next_cursor"] is None
    return body["runs"]


def column(page, name: str) -> list[str]:
    index = COLUMNS.index(name)
    return page.locator(".runs-table tbody tr").evaluate_all(
        f"rows => rows.map(r => r.cells[{index}].innerText.trim())"
    )


def sorted_header(page):
    return page.locator(".runs-table thead th[aria-sort]")


def test_csv_download_matches_the_api(page, problems, live_server, tmp_path):
    page.goto(live_server.url(f"/pipelines/{RANKER}"))
    link = page.get_by_role("link", name="Download CSV")
    expect(link).to_be_visible()
    with page.expect_download() as info:
        link.click()
    download = info.value
    assert download.suggested_filename == f"cadence-{RANKER}-runs.csv"
    path = tmp_path / download.suggested_filename
    download.save_as(path)
    rows = list(csv.reader(io.StringIO(path.read_text(encoding="utf-8"))))

    runs = api_runs(live_server)
    header, body = rows[0], rows[1:]
    assert header == list(runs[0].keys())
    assert len(body) == len(runs) == 25
    records = [dict(zip(header, row, strict=True)) for row in body]
    assert [r["run_id"] for r in records] == [r["run_id"] for r in runs]
    for got, want in zip(records, runs, strict=True):
        for key in ("gpu_hours", "cost_usd", "gpu_utilization", "wall_clock_hours"):
            assert float(got[key]) == pytest.approx(want[key], rel=1e-12), (got["run_id"], key)
        assert int(got["workers"]) == want["workers"]
        assert got["variant"] == want["variant"]
        assert json.loads(got["tags"]) == want["tags"]
        assert len(json.loads(got["interruptions"])) == len(want["interruptions"])
        if want["quality_value"] is None:  # the scaling probes report no quality
            assert got["quality_value"] == ""
        else:
            assert float(got["quality_value"]) == pytest.approx(want["quality_value"])
    # The page says how many runs the file holds.
    expect(page.locator("#runs")).to_contain_text(f"All {len(runs)} runs")
    problems.assert_clean()


def test_clicking_a_header_sorts_the_table(page, problems, live_server):
    page.goto(live_server.url(f"/pipelines/{RANKER}"))
    expect(sorted_header(page)).to_have_count(1)
    expect(sorted_header(page)).to_contain_text("Started")
    expect(sorted_header(page)).to_have_attribute("aria-sort", "descending")
    runs = api_runs(live_server)
    assert column(page, "Run") == [r["run_id"] for r in runs]  # newest first, as the API

    header = page.locator(".runs-table thead").get_by_role("link", name="GPU-hours")
    with page.expect_navigation():
        header.click()
    assert "sort=gpu_hours" in page.url and "order=desc" in page.url
    expect(sorted_header(page)).to_have_count(1)
    expect(sorted_header(page)).to_contain_text("GPU-hours ▼")
    expect(sorted_header(page)).to_have_attribute("aria-sort", "descending")
    values = [number(v) for v in column(page, "GPU-hours")]
    assert values == sorted(values, reverse=True)
    assert values[0] == pytest.approx(max(r["gpu_hours"] for r in runs), abs=0.05)

    with page.expect_navigation():
        page.locator(".runs-table thead").get_by_role("link", name="GPU-hours").click()
    assert "order=asc" in page.url
    expect(sorted_header(page)).to_have_attribute("aria-sort", "ascending")
    expect(sorted_header(page)).to_contain_text("GPU-hours ▲")
    values = [number(v) for v in column(page, "GPU-hours")]
    assert values == sorted(values)
    assert values[0] == pytest.approx(min(r["gpu_hours"] for r in runs), abs=0.05)
    problems.assert_clean()


def test_pagination_links_walk_through_the_runs(page, problems, live_server):
    runs = [r["run_id"] for r in api_runs(live_server)]
    page.goto(live_server.url(f"/pipelines/{RANKER}?size=13"))
    pager = page.get_by_role("navigation", name="Run pages")
    expect(pager).to_contain_text("Page 1 of 2")
    expect(pager.get_by_role("link", name="← Previous page")).to_have_count(0)
    assert column(page, "Run") == runs[:13]

    with page.expect_navigation():
        pager.get_by_role("link", name="Next page →").click()
    expect(pager).to_contain_text("Page 2 of 2")
    assert "page=2" in page.url and "size=13" in page.url
    assert column(page, "Run") == runs[13:]
    expect(pager.get_by_role("link", name="Next page →")).to_have_count(0)

    with page.expect_navigation():
        pager.get_by_role("link", name="← Previous page").click()
    expect(pager).to_contain_text("Page 1 of 2")
    assert column(page, "Run") == runs[:13]
    problems.assert_clean()
