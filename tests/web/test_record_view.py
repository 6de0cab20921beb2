"""The forecast's record on the pages: the pipeline page's chart and sentence (or its empty
state), the figure builder, and the portfolio's sentence from the stored forecasts."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta

from fastapi.testclient import TestClient

from app.analytics import record
from app.db.engine import Database
from app.planning.backtest import month_start
from app.planning.record import MonthForecast, score
from app.web.figures_base import has_data
from app.web.figures_record import record_figure
from tests.fixtures.builders import make_run, this_month_run
from tests.fixtures.forecast_record import CURRENT, FIRST, NAME, at, post, weekly_runs


def month(first: date, expected: float, lo: float, hi: float, bill: float) -> object:
    at = datetime(first.year, first.month, 1, tzinfo=UTC)
    made = MonthForecast(first, at, expected, lo, hi, None, None, None, "backtest")
    return score(made, bill)


def test_the_figure_draws_the_band_the_expected_bill_and_the_bill() -> None:
    # Oct: band 900-1,100, bill 1,200 (above the p90: an x); Sep: bill 1,000 inside.
    months = [
        month(date(2026, 10, 1), 1000, 900, 1100, 1200),
        month(date(2026, 9, 1), 950, 850, 1050, 1000),
    ]
    fig = record_figure(months)  # type: ignore[arg-type]
    assert has_data(fig)
    lo, hi, expected, bill = fig["data"]
    assert lo["x"] == ["Sep 2026", "Oct 2026"]  # oldest first
    assert (lo["y"], hi["y"], expected["y"]) == ([850, 900], [1050, 1100], [950, 1000])
    assert hi["fill"] == "tonexty"
    assert bill["y"] == [1000, 1200] and bill["marker"]["symbol"] == ["circle", "x"]
    assert fig["layout"]["meta"]["kind"] == "forecast_record"


def test_a_pipeline_with_no_closed_month_shows_the_empty_state(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    run = make_run(pipeline="fresh", run_id="a", **this_month_run())
    r = client.post("/api/v1/runs", json=run, headers=ingest_headers)
    assert r.status_code in (200, 201), r.text
    html = client.get("/pipelines/fresh").text
    assert 'id="record"' in html and 'data-empty="record"' in html
    assert "appears here once a month has closed" in html
    assert "data-record-sentence" not in html


def test_the_page_says_the_record_in_one_sentence(
    client: TestClient, admin_headers: dict[str, str], ingest_headers: dict[str, str]
) -> None:
    body = {"runs_per_week": 1, "monthly_budget_usd": 900.0, "price_per_gpu_hour": 2.0}
    assert client.put(f"/api/v1/pipelines/{NAME}", json=body, headers=admin_headers).is_success
    post(client, ingest_headers, weekly_runs(FIRST, CURRENT))
    api = client.get(f"/api/v1/pipelines/{NAME}/forecast-record?months=12").json()
    html = client.get(f"/pipelines/{NAME}").text
    found = re.search(r"<p class=\"summary\" data-record-sentence>([^<]+)</p>", html)
    assert found is not None
    assert found.group(1) == api["summary"]["sentence"].replace("'", "&#39;")
    assert 'id="fig-record"' in html and "data-record-backtested" in html


def test_the_portfolio_says_the_organisations_record_from_stored_forecasts(
    client: TestClient,
    db: Database,
    admin_headers: dict[str, str],
    ingest_headers: dict[str, str],
) -> None:
    body = {"runs_per_week": 1, "monthly_budget_usd": 900.0, "price_per_gpu_hour": 2.0}
    assert client.put(f"/api/v1/pipelines/{NAME}", json=body, headers=admin_headers).is_success
    post(client, ingest_headers, weekly_runs(FIRST, CURRENT))
    assert "No pipeline has a closed month to score yet." in client.get("/").text
    db.kept.clear()  # the record of the month is kept: this test stores rows under it
    for first in record.closed_months(CURRENT, 3):  # three months recorded at their start
        now = datetime(first.year, first.month, 1, tzinfo=UTC) + timedelta(minutes=5)
        assert record.record_months(db, now=now) == 1
    api = client.get(f"/api/v1/pipelines/{NAME}/forecast-record?months=3").json()
    assert {m["source"] for m in api["months"]} == {"recorded"}
    exceeded = api["summary"]["p90_exceeded"]
    html = client.get("/").text
    # 3 pipeline-months, the same months the pipeline's own record scored.
    assert f"The p90 was exceeded in {exceeded / 3:.0%} of 3 pipeline-months" in html
    # A late, costly run in the newest month: the organisation's record scores it again
    # (the pipeline's change count moved), equal to the pipeline's own record.
    newest = record.closed_months(CURRENT, 1)[0]
    late = at(month_start(newest) + timedelta(days=2), 500, run_id="late")
    post(client, ingest_headers, [late])
    api = client.get(f"/api/v1/pipelines/{NAME}/forecast-record?months=3").json()
    assert api["months"][0]["p90_exceeded"] is True
    with db.read() as s:
        org = record.org_record(s, [NAME])
    assert (org.months, org.p90_exceeded, org.inside_band) == (
        3, api["summary"]["p90_exceeded"], api["summary"]["inside_band"]
    )  # fmt: skip
    assert org.p90_exceeded >= 1
