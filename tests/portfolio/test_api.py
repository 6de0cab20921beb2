"""GET /api/v1/portfolio: the overview's totals and rows as JSON, paged by cursor, with
the same figures as the page and the projection endpoint."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient

from tests.fixtures.builders import demo_week


def test_rows_and_totals_agree_with_the_page_and_the_projection(demo: TestClient) -> None:
    body = demo.get("/api/v1/portfolio").json()
    assert body["week"] == demo_week()  # the last complete week, as the page says
    rows = {r["name"]: r for r in body["pipelines"]}
    assert body["total"] == body["totals"]["pipelines"] == len(rows) == 2
    assert body["next_cursor"] is None
    # Totals are sums over the rows (worked in tests/planning/test_portfolio.py).
    spend = sum(r["monthly_cost_usd"] or 0.0 for r in rows.values())
    assert body["totals"]["monthly_spend_usd"] == pytest.approx(spend)
    assert body["totals"]["month_to_date_usd"] == pytest.approx(
        sum(r["month_to_date_usd"] for r in rows.values())
    )
    page = demo.get("/").text
    for name, row in rows.items():
        # The projection endpoint at the pipeline's current cadence, production variant.
        variant = demo.get(f"/api/v1/pipelines/{name}").json()["production_variant"]
        projection = demo.get(
            f"/api/v1/pipelines/{name}/projection", params={"variant": variant}
        ).json()
        assert row["expected_bill_usd"] == row["monthly_cost_usd"]  # the name, and the old one
        assert row["monthly_cost_usd"] == pytest.approx(
            projection["projections"][variant]["current_monthly_cost_usd"], rel=1e-9
        )
        shown = re.search(
            rf'data-pipeline="{name}".*?data-amount="expected-bill">\$([\d,]+)', page, re.S
        )
        assert shown is not None
        assert float(shown.group(1).replace(",", "")) == round(row["monthly_cost_usd"])


def test_pages_by_cursor_cover_every_row_once(demo: TestClient) -> None:
    everything = demo.get("/api/v1/portfolio", params={"sort": "spend"}).json()
    names, cursor = [], None
    while True:
        params = {"sort": "spend", "limit": 1} | ({"cursor": cursor} if cursor else {})
        page = demo.get("/api/v1/portfolio", params=params).json()
        assert page["totals"] == everything["totals"]  # totals on every page
        names += [r["name"] for r in page["pipelines"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert names == [r["name"] for r in everything["pipelines"]]


def test_team_filter_and_bad_input(demo: TestClient) -> None:
    team = demo.get("/api/v1/portfolio", params={"team": "risk-ml"}).json()
    assert [r["name"] for r in team["pipelines"]] == ["fraud-detector"]
    assert team["totals"]["pipelines"] == 1 and "risk-ml" in team["teams"]
    bad_sort = demo.get("/api/v1/portfolio", params={"sort": "colour"})
    assert bad_sort.status_code == 422 and "sort" in bad_sort.text
    bad_cursor = demo.get("/api/v1/portfolio", params={"cursor": "bm8tc3VjaA"})
    assert bad_cursor.status_code == 422
    assert bad_cursor.json()["error"]["fields"][0]["field"] == "cursor"
