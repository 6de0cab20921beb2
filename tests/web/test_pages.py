"""Server-rendered pages without a browser: content, escaping, empty states, CSV."""

from __future__ import annotations

import csv
import io
import json
import re
from datetime import timedelta

import pytest
from fastapi.testclient import TestClient

from app.planning.weekly import iso_week
from tests.fixtures.builders import demo_monday, demo_week, make_run

XSS = "</script><script>alert(1)</script>"


def test_overview_cards(demo: TestClient) -> None:
    html = demo.get("/").text
    assert "Recommendations ranker" in html and "Fraud detector" in html
    assert 'data-pipeline="recsys-ranker"' in html
    assert "verdict-pass" in html  # the demo candidate passes the gate
    assert html.count('class="spark"') == 2 and html.count('<svg class="sparkline"') == 2
    assert "plotly" not in html.lower()  # the portfolio needs no chart library


def test_overview_empty(client: TestClient) -> None:
    html = client.get("/").text
    assert "No pipelines yet" in html


def test_pipeline_page_sections(demo: TestClient) -> None:
    r = demo.get("/pipelines/recsys-ranker")
    assert r.status_code == 200
    html = r.text
    for section in (
        "projection",
        "levers",
        "checkpoints",
        "gate",
        "goodput",
        "badput",
        "quality",
        "scaling",
        "runs",
        "value",
        "record",
    ):
        assert f'id="{section}"' in html, section
    figures = re.findall(r'<script type="application/json" id="(fig-[a-z_]+)">', html)
    assert set(figures) == {
        "fig-cost",
        "fig-checkpoint",
        "fig-goodput",
        "fig-run_gpu",
        "fig-week_gpu",
        "fig-run_usd",
        "fig-week_usd",
        "fig-quality",
        "fig-scaling",
        "fig-cadence_value",
        "fig-decay",
        "fig-record",  # the demo's runs span closed months: the forecast's record
    }
    assert re.search(r'src="/static/vendor/plotly-basic\.min\.js\?v=[0-9a-f]{12}"', html)
    assert "cdn" not in html.lower()


def embedded(html: str, fig_id: str) -> dict[str, object]:
    match = re.search(rf'<script type="application/json" id="{fig_id}">(.*?)</script>', html, re.S)
    assert match, fig_id
    return json.loads(match.group(1))  # type: ignore[no-any-return]


def test_cost_figure_matches_api(demo: TestClient) -> None:
    html = demo.get("/pipelines/recsys-ranker").text
    fig = embedded(html, "fig-cost")
    api = demo.get("/api/v1/pipelines/recsys-ranker/projection", params={"cadences": "1,2"}).json()
    baseline = next(t for t in fig["data"] if t["name"] == "baseline")  # type: ignore[index]
    expected = [c["monthly_cost_usd"] for c in api["projections"]["baseline"]["cadences"]]
    assert baseline["y"] == pytest.approx(expected)


def test_whatif_fragment_changes_cost(demo: TestClient) -> None:
    base = demo.get("/pipelines/recsys-ranker/whatif").json()
    faster = demo.get("/pipelines/recsys-ranker/whatif", params={"utilization_target": 0.7}).json()

    def first_cost(html: str) -> float:
        m = re.search(r'data-testid="monthly-cost">\$([\d,]+)<', html)
        assert m
        return float(m.group(1).replace(",", ""))

    assert first_cost(faster["html"]) < first_cost(base["html"])
    assert faster["figures"]["cost"]["data"]
    r = demo.get("/pipelines/recsys-ranker/whatif", params={"utilization_target": 38})
    assert r.status_code == 422


MANAGER_FIRST = ("decision", "projection", "gate", "record")  # answer, cost, gate, record
ENGINEERING = (
    "levers", "checkpoints", "value", "goodput", "badput", "reconciliation", "quality",
    "scaling", "alerts", "runs",  # (reconciliation: the cloud bill beside the GPU time)
    "changes",
)  # fmt: skip


def test_pipeline_page_puts_the_managers_sections_first(demo: TestClient) -> None:
    html = demo.get("/pipelines/recsys-ranker").text
    manager, _, engineering = html.partition('id="signpost"')
    section = r'<section class="panel[^"]*" id="([a-z_]+)"'
    assert re.findall(section, manager) == list(MANAGER_FIRST)
    # The signpost ends the manager's part and lists every engineering section; they
    # follow it, folded in one <details> (open from 600 px).
    assert re.findall(section, engineering) == list(ENGINEERING)
    toc = re.findall(r'<li><a href="#([a-z_]+)">', engineering.split("</nav>")[0])
    assert toc == [s for s in ENGINEERING if s != "changes"]
    assert '<details class="engineering" id="engineering" data-open-from="600">' in engineering


def test_whatif_fragment_re_renders_the_checkpoint_section_too(demo: TestClient) -> None:
    body = demo.get("/pipelines/recsys-ranker/whatif", params={"failure_rate": 0.01}).json()
    assert 'id="decision"' in body["decision_html"] and 'id="decision"' not in body["html"]
    assert 'id="projection"' in body["html"] and 'id="checkpoints"' not in body["html"]
    assert 'id="checkpoints"' in body["engineer_html"]
    assert 'data-figure="fig-checkpoint"' in body["engineer_html"]


def test_xss_names_render_as_text(
    client: TestClient, ingest_headers: dict[str, str], admin_headers: dict[str, str]
) -> None:
    client.put(
        "/api/v1/pipelines/xss",
        headers=admin_headers,
        json={"display_name": XSS, "owner": "<b>bold</b>"},
    )
    run = make_run(pipeline="xss", variant=XSS, tags={"k": "<img src=x onerror=alert(3)>"})
    assert client.post("/api/v1/runs", json=run, headers=ingest_headers).status_code == 201
    for url in ("/", "/pipelines/xss", "/review?week=2026-W45"):
        html = client.get(url).text
        assert "<script>alert(1)</script>" not in html, url
        assert "<img src=x" not in html, url
        assert "<b>bold</b>" not in html, url
    html = client.get("/pipelines/xss").text
    assert "&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in html
    # Figure JSON inside <script type="application/json"> never contains a raw "<".
    for body in re.findall(
        r'<script type="application/json" id="fig-[a-z_]+">(.*?)</script>', html, re.S
    ):
        assert "<" not in body


def test_empty_pipeline_explains(client: TestClient, admin_headers: dict[str, str]) -> None:
    client.put("/api/v1/pipelines/empty", headers=admin_headers, json={})
    html = client.get("/pipelines/empty").text
    assert 'data-figure="fig-cost"' not in html
    assert "No runs yet: these figures appear once the training job reports" in html
    assert "No runs of variant" in html


def test_csv_matches_api(demo: TestClient) -> None:
    r = demo.get("/pipelines/recsys-ranker/runs.csv")
    assert r.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(r.text)))
    api = demo.get("/api/v1/runs", params={"pipeline": "recsys-ranker", "limit": 1000}).json()
    assert [row["run_id"] for row in rows] == [run["run_id"] for run in api["runs"]]
    assert list(rows[0]) == list(api["runs"][0])
    for row, run in zip(rows, api["runs"], strict=True):
        assert float(row["cost_usd"]) == pytest.approx(run["cost_usd"])
        assert json.loads(row["tags"]) == run["tags"]
        assert json.loads(row["interruptions"]) == run["interruptions"]


def test_runs_table_sorts_and_pages(demo: TestClient) -> None:
    html = demo.get(
        "/pipelines/recsys-ranker",
        params={"sort": "gpu_hours", "order": "asc", "size": 5, "page": 2},
    ).text
    assert 'aria-sort="ascending"' in html
    assert "Page 2 of 5" in html
    assert demo.get("/pipelines/recsys-ranker", params={"sort": "bogus"}).status_code == 422


def test_review_page(demo: TestClient) -> None:
    week = demo_week()
    html = demo.get("/review", params={"week": week}).text
    assert f"Weekly goodput review: {week}" in html
    previous = iso_week(demo_monday() - timedelta(weeks=1))
    assert 'data-pipeline="recsys-ranker"' in html and previous in html
    r = demo.get("/review", params={"week": "48"}, headers={"accept": "text/html"})
    assert r.status_code == 422
    assert "ISO week" in r.text and "<html" in r.text


def test_review_pages_every_pipeline_with_totals_over_all(
    client: TestClient, ingest_headers: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("app.web.review.REVIEW_PAGE", 2)
    # Three pipelines, one run each in 2026-W45 at $2.5/GPU-h (the test default) on
    # 8 workers x 14 h = 112 GPU-h: $280 a run, $840 in total.
    for name in ("rev-a", "rev-b", "rev-c"):
        run = make_run(pipeline=name, run_id=f"{name}-1")
        assert client.post("/api/v1/runs", json=run, headers=ingest_headers).status_code == 201
    first = client.get("/review", params={"week": "2026-W45"}).text
    # Two lines a page (largest waste first); the week's line and the totals row are over
    # all three pipelines on every page.
    rows = re.compile(r'<tr data-pipeline="([^"]+)"')
    assert "3 runs cost $840" in first and "Rows 1–2 of 3 · page 1 of 2" in first
    second = client.get("/review", params={"week": "2026-W45", "page": 2}).text
    assert "3 runs cost $840" in second and "Rows 3–3 of 3 · page 2 of 2" in second
    one, two = rows.findall(first), rows.findall(second)
    assert len(one) == 2 and len(two) == 1
    assert sorted(one + two) == ["rev-a", "rev-b", "rev-c"]


def test_html_errors_for_browsers(client: TestClient) -> None:
    r = client.get("/pipelines/nope", headers={"accept": "text/html"})
    assert r.status_code == 404
    assert "<h1>404</h1>" in r.text
    assert client.get("/api/v1/pipelines/nope").json()["error"]["code"] == "not_found"


def test_plotly_served_locally(client: TestClient) -> None:
    r = client.get("/static/vendor/plotly-basic.min.js")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/javascript")
    assert len(r.content) > 1_000_000  # decoded: the basic bundle is 1.2 MB as text
    assert b"plotly.js" in r.content[:200]
    assert client.get("/static/dashboard.js").status_code == 200


def test_table_links_keep_the_view(demo: TestClient) -> None:
    html = demo.get(
        "/pipelines/recsys-ranker", params={"utilization_target": 0.7, "budget": 900, "size": 5}
    ).text
    links = re.findall(r'href="(\?[^"]*sort=gpu_hours[^"]*)"', html)
    assert links, "no sort link for GPU-hours"
    assert "utilization_target=0.7" in links[0] and "budget=900" in links[0]
    assert "size=5" in links[0] and "page=1" in links[0]


def test_demo_shows_what_retraining_more_often_buys(demo: TestClient) -> None:
    html = demo.get("/pipelines/recsys-ranker").text
    assert 'id="chart-cadence_value"' in html and 'id="chart-decay"' in html
    assert "minimises cost" in html and "$3,000/month per 0.01" in html
    body = demo.get("/api/v1/pipelines/recsys-ranker/cadence").json()
    # Seeded demo: evaluations lose ~0.01 ndcg per week; V = $300,000 per unit and
    # ~$280 per run put the optimum near sqrt(3000 / 2426.67) = 1.11 runs/week.
    assert body["decay"]["model"] == "linear"
    assert 0.005 < body["decay"]["rate_per_week"] < 0.015
    assert 0.7 < body["optimum"]["runs_per_week"] < 1.6


def test_portfolio_totals_filter_and_sort(demo: TestClient) -> None:
    html = demo.get("/").text
    assert "data-totals" in html and "Expected bill at current cadences" in html
    assert 'data-total="over_budget"' in html and "data-spark-values" in html
    team = demo.get("/", params={"team": "risk-ml"}).text
    assert 'data-pipeline="fraud-detector"' in team and 'data-pipeline="recsys-ranker"' not in team
    by_spend = demo.get("/", params={"sort": "spend"}).text
    order = re.findall(r'<article class="card" data-pipeline="([^"]+)"', by_spend)
    spends = [
        float(v.replace(",", ""))
        for v in re.findall(r'data-amount="expected-bill">\$([\d,]+)', by_spend)
    ]
    assert len(order) == 2 and spends == sorted(spends, reverse=True)
    assert demo.get("/", params={"sort": "colour"}).status_code == 422


def test_the_api_reference_links_back_to_the_dashboard(client: TestClient) -> None:
    page = client.get("/docs").text
    assert '<a href="/">← The Cadence dashboard</a>' in page


def test_empty_states_speak_a_readers_words(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    """A pipeline with runs but no checkpoint time, evaluations or value: each section says
    what to report or set, never which API parameter or path to send."""
    import re

    from tests.fixtures.builders import make_run

    run = make_run(pipeline="plain-words", checkpoint_hours=0.0, interruptions=[])
    assert client.post("/api/v1/runs", json=run, headers=ingest_headers).status_code == 201
    html = client.get("/pipelines/plain-words").text
    empties = re.findall(r'<p class="empty"[^>]*>(.*?)</p>', html, flags=re.S)
    assert empties, "the page shows its empty states"
    for text in empties:
        assert "/api/v1/" not in text and "pass checkpoint_write_hours" not in text, text
        assert "Input should" not in text, text
    assert "No checkpoint advice yet" in html and "No decay curve yet" in html
