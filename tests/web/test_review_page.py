"""The weekly review page and its exports, over HTTP (demo data loaded relative to now:
its latest runs are in the last complete ISO week, ``demo_week()``)."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime, timedelta

import pytest
from fastapi.testclient import TestClient

from app.planning.causes import CAUSE_LABELS
from app.planning.weekly import iso_week, last_complete_week
from app.review.lines import EXPORT_FIELDS
from tests.fixtures.builders import demo_week

WEEK = demo_week()


def test_opens_on_the_last_complete_week_in_utc(demo: TestClient) -> None:
    html = demo.get("/review").text
    expected = iso_week(last_complete_week(datetime.now(UTC).date()))
    assert f"Weekly goodput review: {expected}</h1>" in html
    assert "weeks in UTC" in html
    assert "still in progress" not in html


def test_cannot_go_into_the_future(demo: TestClient) -> None:
    today = datetime.now(UTC).date()
    current = iso_week(today)
    html = demo.get("/review", params={"week": current}).text
    assert "still in progress" in html and "→</a>" not in html  # no link past this week
    r = demo.get("/review", params={"week": iso_week(today + timedelta(weeks=1))})
    assert r.status_code == 422
    field = r.json()["error"]["fields"][0]
    assert field["field"] == "week" and "future" in field["reason"]


def test_review_shows_trend_totals_causes_actions_and_exports(demo: TestClient) -> None:
    html = demo.get("/review", params={"week": WEEK}).text
    assert 'data-figure="fig-review_trend"' in html
    assert "data-totals" in html and "All pipelines" in html
    for label in CAUSE_LABELS.values():  # the one label of each cause, as the charts say it
        assert label in html
    assert "What to fix first" in html and "/month" in html
    assert f'href="/review.csv?week={WEEK}"' in html and f'href="/review.json?week={WEEK}"' in html


def test_json_and_csv_have_a_row_per_pipeline_in_impact_order(demo: TestClient) -> None:
    body = demo.get("/review.json", params={"week": WEEK}).json()
    assert body["week"] == WEEK and body["timezone"] == "UTC"
    rows = body["rows"]
    names = [r["pipeline"] for r in rows]
    assert sorted(names[:-1]) == ["fraud-detector", "recsys-ranker"] and names[-1] == "TOTAL"
    assert rows[0]["badput_usd"] >= rows[1]["badput_usd"]
    total = rows[-1]
    assert total["runs"] == rows[0]["runs"] + rows[1]["runs"]
    assert total["spend_usd"] == pytest.approx(
        rows[0]["spend_usd"] + rows[1]["spend_usd"], abs=0.02
    )
    r = demo.get("/review.csv", params={"week": WEEK})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/csv")
    assert f"cadence-review-{WEEK}.csv" in r.headers["content-disposition"]
    table = list(csv.DictReader(io.StringIO(r.text)))
    assert tuple(table[0]) == EXPORT_FIELDS
    assert [t["pipeline"] for t in table] == names
    assert float(table[0]["spend_usd"]) == rows[0]["spend_usd"]


def test_team_filter(demo: TestClient) -> None:
    html = demo.get("/review", params={"week": WEEK, "team": "risk-ml"}).text
    assert 'data-pipeline="fraud-detector"' in html
    assert 'data-pipeline="recsys-ranker"' not in html
    rows = demo.get("/review.json", params={"week": WEEK, "team": "risk-ml"}).json()["rows"]
    assert [r["pipeline"] for r in rows] == ["fraud-detector", "TOTAL"]


def test_csv_cells_are_spreadsheet_safe(demo: TestClient, admin_headers: dict[str, str]) -> None:
    body = {"display_name": "=HYPERLINK(1)", "owner": "@team"}
    r = demo.put("/api/v1/pipelines/recsys-ranker", json=body, headers=admin_headers)
    assert r.status_code == 200, r.text
    rows = list(csv.DictReader(io.StringIO(demo.get("/review.csv", params={"week": WEEK}).text)))
    ranker = next(r for r in rows if r["pipeline"] == "recsys-ranker")
    assert ranker["display_name"] == "'=HYPERLINK(1)" and ranker["owner"] == "'@team"
