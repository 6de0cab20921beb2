"""Who may create pipelines, and how many: CADENCE_AUTO_CREATE_PIPELINES, token limits,
and CADENCE_PIPELINE_CREATE_PER_HOUR (counted in the database, per token)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.db.engine import Database
from app.main import create_app
from app.pipelines.service import retry_after_seconds
from app.settings import Settings
from tests.fixtures.builders import make_run, make_token
from tests.fixtures.security import bearer


def client_for(db: Database, database_url: str, **overrides: Any) -> TestClient:
    settings = Settings(database_url=database_url, default_price_per_gpu_hour=2.5, **overrides)
    return TestClient(create_app(settings, database=db))


def names(client: TestClient) -> list[str]:
    return [p["name"] for p in client.get("/api/v1/pipelines").json()["pipelines"]]


@pytest.fixture
def closed(db: Database, database_url: str) -> Iterator[TestClient]:
    """Ingest does not create pipelines."""
    with client_for(db, database_url, auto_create_pipelines=False) as c:
        yield c


def test_ingest_to_an_unknown_pipeline_is_refused_when_creation_is_off(
    closed: TestClient, db: Database
) -> None:
    ingest = bearer(make_token(db, "ingest"))
    r = closed.post("/api/v1/runs", json=make_run(pipeline="newcomer"), headers=ingest)
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert "CADENCE_AUTO_CREATE_PIPELINES" in error["message"]
    assert error["fields"] == [{"field": "pipeline", "reason": "no such pipeline"}]
    assert names(closed) == []


def test_a_batch_names_the_run_whose_pipeline_is_unknown(closed: TestClient, db: Database) -> None:
    admin = bearer(make_token(db, "admin"))
    assert closed.put("/api/v1/pipelines/known", json={}, headers=admin).status_code == 200
    runs = [make_run(pipeline="known", run_id="k-1"), make_run(pipeline="other", run_id="o-1")]
    r = closed.post("/api/v1/runs/batch", json={"runs": runs}, headers=admin)
    assert r.status_code == 422, r.text
    assert r.json()["error"]["fields"] == [
        {"field": "runs.1.pipeline", "reason": "no such pipeline"}
    ]
    # All or nothing: the run of the known pipeline was not stored either.
    assert closed.get("/api/v1/runs").json()["runs"] == []
    assert names(closed) == ["known"]
    # Known pipelines still take runs, singly and in batches.
    r = closed.post("/api/v1/runs/batch", json={"runs": runs[:1]}, headers=admin)
    assert r.status_code == 201
    r = closed.post("/api/v1/runs", json=make_run(pipeline="known", run_id="k-2"), headers=admin)
    assert r.status_code == 201


def test_a_limited_token_cannot_create_other_pipelines(client: TestClient, db: Database) -> None:
    token = bearer(make_token(db, "ingest", pipelines=["mine"]))
    r = client.post("/api/v1/runs", json=make_run(pipeline="theirs"), headers=token)
    assert r.status_code == 403
    assert (
        client.post("/api/v1/runs", json=make_run(pipeline="mine"), headers=token).status_code
        == 201
    )
    assert names(client) == ["mine"]


@pytest.fixture
def limited(db: Database, database_url: str) -> Iterator[TestClient]:
    """Three new pipelines per token per hour."""
    with client_for(db, database_url, pipeline_create_per_hour=3) as c:
        yield c


def test_pipeline_creation_is_rate_limited_per_token(limited: TestClient, db: Database) -> None:
    ingest = bearer(make_token(db, "ingest", name="busy"))
    runs = [make_run(pipeline=f"p{i}", run_id="r") for i in (1, 2)]
    assert (
        limited.post("/api/v1/runs/batch", json={"runs": runs}, headers=ingest).status_code == 201
    )
    assert (
        limited.post("/api/v1/runs", json=make_run(pipeline="p3"), headers=ingest).status_code
        == 201
    )
    r = limited.post("/api/v1/runs", json=make_run(pipeline="p4"), headers=ingest)
    assert r.status_code == 429, r.text
    assert r.json()["error"]["code"] == "rate_limited"
    assert "CADENCE_PIPELINE_CREATE_PER_HOUR" in r.json()["error"]["message"]
    assert 1 <= int(r.headers["Retry-After"]) <= 3600
    assert "p4" not in names(limited)
    # Existing pipelines take runs as before; another token has its own allowance.
    r = limited.post("/api/v1/runs", json=make_run(pipeline="p1", run_id="r2"), headers=ingest)
    assert r.status_code == 201
    other = bearer(make_token(db, "admin", name="other"))
    assert (
        limited.post("/api/v1/runs", json=make_run(pipeline="p4"), headers=other).status_code == 201
    )
    assert "p4" in names(limited)
    # PUT creations count against the same allowance.
    for name in ("p5", "p6"):
        assert limited.put(f"/api/v1/pipelines/{name}", json={}, headers=other).status_code == 200
    r = limited.put("/api/v1/pipelines/p7", json={}, headers=other)
    assert r.status_code == 429 and "Retry-After" in r.headers
    assert (
        limited.put("/api/v1/pipelines/p6", json={"owner": "x"}, headers=other).status_code == 200
    )


def test_a_batch_larger_than_the_allowance_is_refused_whole(
    limited: TestClient, db: Database
) -> None:
    ingest = bearer(make_token(db, "ingest"))
    runs = [make_run(pipeline=f"q{i}", run_id="r") for i in range(4)]
    r = limited.post("/api/v1/runs/batch", json={"runs": runs}, headers=ingest)
    assert r.status_code == 422
    assert r.json()["error"]["fields"][0]["field"] == "runs.0.pipeline"
    assert names(limited) == []


def test_the_allowance_is_shared_by_every_worker(db: Database, database_url: str) -> None:
    """Two apps (two workers) on one database: the count lives in the database."""
    secret = make_token(db, "ingest")
    with (
        client_for(db, database_url, pipeline_create_per_hour=1) as one,
        client_for(db, database_url, pipeline_create_per_hour=1) as two,
    ):
        r = one.post("/api/v1/runs", json=make_run(pipeline="a"), headers=bearer(secret))
        assert r.status_code == 201
        r = two.post("/api/v1/runs", json=make_run(pipeline="b"), headers=bearer(secret))
        assert r.status_code == 429


def test_retry_after_counts_to_the_creation_that_frees_enough_room() -> None:
    now = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    created = [now - timedelta(minutes=50), now - timedelta(minutes=40)]
    # One over: the oldest (11:10) leaves the window at 12:10, in 600 s.
    assert retry_after_seconds(created, 1, now) == 600
    # Two over: the second (11:20) leaves at 12:20, in 1200 s.
    assert retry_after_seconds(created, 2, now) == 1200
    # Already due (clock skew between workers): at least one second.
    assert retry_after_seconds([now - timedelta(hours=2)], 1, now) == 1
