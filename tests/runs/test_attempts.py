"""Attempts: failed, preempted and cancelled runs are stored and paid for, a run may omit
its utilization, and the review and the pipeline page show failed attempts as badput.

The worked numbers (price $2.50 from ``make_run``'s pipeline defaults is not assumed; each
run here sends its price): a failed attempt of 4 workers x 5 h = 20 GPU-h at $3 costs
$60, all of it failed-attempt badput; a succeeded one of 8 x 14 h = 112 GPU-h at $3 with
u = 0.38 costs $336, of which 69.44 GPU-h ($208.32) is idle.
"""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime

import pytest
from fastapi.testclient import TestClient

from app.planning.weekly import iso_week, last_complete_week
from tests.fixtures.builders import crashed, last_week_day, make_run, retried

MONDAY = last_complete_week(datetime.now(UTC).date())
WEEK = iso_week(MONDAY)


def test_a_failed_attempt_without_utilization_is_stored_and_paid_for(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    r = client.post("/api/v1/runs", json=crashed(), headers=ingest_headers)
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["outcome"] == "failed" and body["retraining_id"] == "nightly-1"
    assert body["gpu_utilization"] is None
    # 4 workers x 5 h = 20 GPU-h at $3 = $60; all of a failed attempt's hours are idle.
    assert body["cost_usd"] == pytest.approx(60.0) and body["idle_gpu_hours"] == 20.0
    # The default retraining is the run itself, and the default outcome succeeded.
    plain = make_run(pipeline="attempts", run_id="plain", **last_week_day(2, 0, 14.0))
    body = client.post("/api/v1/runs", json=plain, headers=ingest_headers).json()
    assert body["outcome"] == "succeeded" and body["retraining_id"] == "plain"


def test_retries_compare_the_new_fields(client: TestClient, ingest_headers: dict[str, str]) -> None:
    assert client.post("/api/v1/runs", json=crashed(), headers=ingest_headers).status_code == 201
    again = client.post("/api/v1/runs", json=crashed(), headers=ingest_headers)
    assert again.status_code == 200  # the same body: a safe retry
    changed = client.post("/api/v1/runs", json=crashed(outcome="preempted"), headers=ingest_headers)
    assert changed.status_code == 409 and "outcome" in changed.json()["error"]["message"]


@pytest.mark.parametrize(
    ("field", "value", "reason"),
    [("outcome", "crashed", "succeeded"), ("retraining_id", "", "at least 1")],
)
def test_bad_attempt_fields_are_named(
    client: TestClient, ingest_headers: dict[str, str], field: str, value: str, reason: str
) -> None:
    r = client.post("/api/v1/runs", json=crashed(**{field: value}), headers=ingest_headers)
    assert r.status_code == 422
    [problem] = r.json()["error"]["fields"]
    assert problem["field"] == field and reason in problem["reason"]


def test_the_review_shows_failed_attempts_in_gpu_hours_and_dollars(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    batch = {"runs": [crashed(), retried()]}
    assert client.post("/api/v1/runs/batch", json=batch, headers=ingest_headers).status_code == 201
    [row, total] = client.get("/review.json", params={"week": WEEK}).json()["rows"]
    assert row["pipeline"] == "attempts" and total["pipeline"] == "TOTAL"
    # Spend: $60 + $336 = $396; failed attempts 20 GPU-h / $60; other idle 69.44 GPU-h.
    assert row["runs"] == 2 and row["spend_usd"] == pytest.approx(396.0)
    assert row["failed_gpu_hours"] == pytest.approx(20.0)
    assert row["failed_usd"] == pytest.approx(60.0)
    assert row["other_idle_gpu_hours"] == pytest.approx(0.62 * 112)
    assert row["badput_usd"] == pytest.approx(60.0 + 0.62 * 112 * 3.0)
    html = client.get("/review", params={"week": WEEK}).text
    assert "Failed attempts" in html
    csv_rows = list(csv.DictReader(io.StringIO(client.get(f"/review.csv?week={WEEK}").text)))
    assert float(csv_rows[0]["failed_usd"]) == pytest.approx(60.0)


def test_the_pipeline_page_and_exports_show_the_attempt(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    batch = {"runs": [crashed(), retried()]}
    assert client.post("/api/v1/runs/batch", json=batch, headers=ingest_headers).status_code == 201
    html = client.get("/pipelines/attempts").text
    assert "utilization unknown" in html and "failed attempt" in html
    assert "Failed attempts" in html  # the weekly badput chart's trace
    runs = client.get("/api/v1/runs", params={"pipeline": "attempts"}).json()["runs"]
    assert {r["run_id"]: r["outcome"] for r in runs} == {
        "nightly-1-a": "failed",
        "nightly-1-b": "succeeded",
    }
    exported = client.get("/pipelines/attempts/runs.csv").text
    header = next(csv.reader(io.StringIO(exported)))
    assert "outcome" in header and "retraining_id" in header


def test_planning_windows_hold_succeeded_measured_attempts_only(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    """Until projections price retrainings, a failed attempt must not pass for a cheap
    run: the projection's typical run is the succeeded one (112 GPU-h x $3 = $336)."""
    batch = {"runs": [crashed(), retried()]}
    assert client.post("/api/v1/runs/batch", json=batch, headers=ingest_headers).status_code == 201
    proj = client.get("/api/v1/pipelines/attempts/projection", params={"cadence": 1}).json()
    [entry] = [c for c in proj["projections"]["baseline"]["cadences"] if c["runs_per_week"] == 1]
    assert entry["cost_per_run_usd"] == pytest.approx(336.0)
