"""Attempts reported at their start (``outcome: "running"``, no ``finished_at``) and
completed later under the same (pipeline, run_id): the lifecycle through the API.

The worked run is make_run's (8 workers x 14 h = 112 GPU-h at $2.50 = $280 when it
finishes). While it runs it costs nothing in the rollups (the month to date counts it at
its cost so far: tests/analytics/test_month_running.py).
"""

from __future__ import annotations

import io
import re
from csv import DictReader
from datetime import UTC, datetime, timedelta
from typing import Any

from fastapi.testclient import TestClient

from app.db import rollup as rollups
from app.db.engine import Database
from tests.fixtures.builders import make_run
from tests.fixtures.rollups import assert_rollups_match

FINISHED = make_run(pipeline="running", run_id="r-1", price_per_gpu_hour=2.5)


def started(run: dict[str, Any]) -> dict[str, Any]:
    """The start report of ``run``: no finish, billed hours or utilization yet."""
    drop = ("finished_at", "gpu_hours", "gpu_utilization", "utilization_source", "mfu")
    return {**{k: v for k, v in run.items() if k not in drop}, "outcome": "running"}


def stored_rollups(db: Database) -> list[dict[str, Any]]:
    with db.read() as s:
        return rollups.stored(s)


def test_a_start_then_its_finish(client: TestClient, db: Database, ingest_headers: Any) -> None:
    before = stored_rollups(db)
    r = client.post("/api/v1/runs", json=started(FINISHED), headers=ingest_headers)
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["outcome"] == "running" and body["finished_at"] is None
    assert body["wall_clock_hours"] is None and body["cost_usd"] == 0.0
    # A running attempt adds nothing to the rollups until it finishes.
    assert stored_rollups(db) == before
    assert_rollups_match(db)
    # The same start again is a safe retry.
    again = client.post("/api/v1/runs", json=started(FINISHED), headers=ingest_headers)
    assert again.status_code == 200 and again.json()["id"] == body["id"]
    # Its finish completes it: 200, the same row, now finished and paid for.
    done = client.post("/api/v1/runs", json=FINISHED, headers=ingest_headers)
    assert done.status_code == 200, done.text
    out = done.json()
    assert out["id"] == body["id"] and out["outcome"] == "succeeded"
    # 8 workers x 14 h = 112 GPU-h at $2.50 = $280.
    assert out["wall_clock_hours"] == 14.0 and out["cost_usd"] == 280.0
    assert stored_rollups(db) != before
    assert_rollups_match(db)
    # The finish sent again is a retry; a start after the finish is refused in words.
    assert client.post("/api/v1/runs", json=FINISHED, headers=ingest_headers).status_code == 200
    late = client.post("/api/v1/runs", json=started(FINISHED), headers=ingest_headers)
    assert late.status_code == 409
    error = late.json()["error"]
    assert "already finished" in error["message"] and "running" in error["message"]
    assert error["fields"][0]["field"] == "outcome"


def test_a_start_in_a_batch_is_completed_by_a_batch(
    client: TestClient, db: Database, ingest_headers: Any
) -> None:
    runs = [make_run(pipeline="running", run_id=f"b-{i}", price_per_gpu_hour=2.5) for i in range(9)]
    first = client.post(
        "/api/v1/runs/batch", json={"runs": [started(r) for r in runs]}, headers=ingest_headers
    )
    assert first.status_code == 201 and first.json()["created"] == 9
    assert stored_rollups(db) == []
    # Eight finish, one is a repeated start, one new finished run: 8 completed.
    extra = make_run(pipeline="running", run_id="b-new", price_per_gpu_hour=2.5)
    second = client.post(
        "/api/v1/runs/batch",
        json={"runs": [*runs[:8], started(runs[8]), extra]},
        headers=ingest_headers,
    )
    assert second.status_code == 201, second.text
    body = second.json()
    assert (body["created"], body["completed"], body["existing"]) == (1, 8, 1)
    assert [item["status"] for item in body["runs"]][7:] == ["completed", "existing", "created"]
    assert_rollups_match(db)
    with db.read() as s:
        [row] = [r for r in rollups.stored(s) if r["variant"] == "baseline"]
    assert row["runs"] == 9  # eight completed + the new one; the one still running is not


def test_a_running_report_names_what_it_cannot_have(
    client: TestClient, ingest_headers: Any
) -> None:
    bad = {**started(FINISHED), "finished_at": FINISHED["finished_at"], "gpu_hours": 3.0}
    r = client.post("/api/v1/runs", json=bad, headers=ingest_headers)
    assert r.status_code == 422
    assert {f["field"] for f in r.json()["error"]["fields"]} == {"finished_at", "gpu_hours"}
    unfinished = {k: v for k, v in FINISHED.items() if k != "finished_at"}
    r = client.post("/api/v1/runs", json=unfinished, headers=ingest_headers)
    assert r.status_code == 422
    [problem] = r.json()["error"]["fields"]
    assert problem["field"] == "finished_at" and "running" in problem["reason"]


def test_a_finish_that_changes_the_start_is_a_conflict(
    client: TestClient, ingest_headers: Any
) -> None:
    assert (
        client.post("/api/v1/runs", json=started(FINISHED), headers=ingest_headers).status_code
        == 201
    )
    moved = {**FINISHED, "variant": "candidate"}
    r = client.post("/api/v1/runs", json=moved, headers=ingest_headers)
    assert r.status_code == 409 and "variant" in r.json()["error"]["message"]


def test_running_attempts_are_listed_as_running(client: TestClient, ingest_headers: Any) -> None:
    client.post("/api/v1/runs", json=started(FINISHED), headers=ingest_headers)
    listed = client.get("/api/v1/runs?pipeline=running", headers=ingest_headers).json()["runs"]
    assert [(r["outcome"], r["finished_at"]) for r in listed] == [("running", None)]
    csv = client.get("/pipelines/running/runs.csv", headers=ingest_headers)
    assert csv.status_code == 200, csv.text
    [cells] = list(DictReader(io.StringIO(csv.text)))
    assert cells["outcome"] == "running" and cells["finished_at"] == ""


def test_the_pipeline_page_says_what_runs_now(client: TestClient, ingest_headers: Any) -> None:
    # A finished retraining yesterday and one running for six hours (8 workers at $2.50:
    # 8 x 6 x 2.5 = $120 so far; counted a typical retraining, $280).
    now = datetime.now(UTC).replace(microsecond=0)
    done_at = now - timedelta(hours=30)
    finished = make_run(
        pipeline="running", run_id="r-0", price_per_gpu_hour=2.5,
        started_at=done_at.isoformat(), finished_at=(done_at + timedelta(hours=14)).isoformat(),
    )  # fmt: skip
    assert client.post("/api/v1/runs", json=finished, headers=ingest_headers).status_code == 201
    run = {**started(FINISHED), "started_at": (now - timedelta(hours=6)).isoformat()}
    assert client.post("/api/v1/runs", json=run, headers=ingest_headers).status_code == 201
    page = client.get("/pipelines/running")
    assert page.status_code == 200
    [sentence] = re.findall(r'data-testid="month-running">([^<]*)<', page.text)
    assert sentence.startswith("Running now: 1 attempt, $120")
    assert "counted $280" in sentence


def test_measurements_wait_for_the_finish(client: TestClient, ingest_headers: Any) -> None:
    assert client.post("/api/v1/runs", json=started(FINISHED), headers=ingest_headers).is_success
    url = "/api/v1/pipelines/running/runs/r-1/measurements"
    r = client.patch(url, json={"gpu_utilization": 0.5}, headers=ingest_headers)
    assert r.status_code == 422, r.text
    assert "still running" in r.text
