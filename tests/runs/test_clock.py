"""A run dated ahead of the server's clock is refused: it would become the pipeline's
newest run (and its current week) for as long as the typo stands."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from fastapi.testclient import TestClient

from app.db.engine import Database
from app.main import create_app
from app.settings import Settings
from tests.fixtures.builders import make_run


def dated(start: datetime, run_id: str) -> dict[str, object]:
    return make_run(
        run_id=run_id,
        started_at=start.isoformat(),
        finished_at=(start + timedelta(hours=14)).isoformat(),
    )


def test_a_start_more_than_a_day_ahead_is_a_422_naming_started_at(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    now = datetime.now(UTC)
    # 23 h ahead: clock skew, accepted. 2062: a typo, refused, single and in a batch.
    ok = client.post(
        "/api/v1/runs", json=dated(now + timedelta(hours=23), "skew"), headers=ingest_headers
    )
    assert ok.status_code == 201, ok.text
    r = client.post(
        "/api/v1/runs", json=dated(datetime(2062, 1, 5, tzinfo=UTC), "typo"), headers=ingest_headers
    )
    assert r.status_code == 422
    [field] = r.json()["error"]["fields"]
    assert field["field"] == "started_at" and "after the server's clock" in field["reason"]
    batch = {
        "runs": [dated(now - timedelta(days=2), "fine"), dated(now + timedelta(days=3), "ahead")]
    }
    r = client.post("/api/v1/runs/batch", json=batch, headers=ingest_headers)
    assert r.status_code == 422 and r.json()["error"]["fields"][0]["field"] == "runs.1.started_at"
    listed = client.get("/api/v1/runs", params={"pipeline": "ranker"}).json()["runs"]
    assert [x["run_id"] for x in listed] == ["skew"]  # nothing of the refused batch stored


def test_the_tolerance_is_a_setting(
    db: Database, settings: Settings, ingest_headers: dict[str, str]
) -> None:
    strict = settings.model_copy(update={"run_future_tolerance_hours": 0.0})
    with TestClient(create_app(strict, database=db)) as c:
        ahead = dated(datetime.now(UTC) + timedelta(hours=1), "an-hour-ahead")
        assert c.post("/api/v1/runs", json=ahead, headers=ingest_headers).status_code == 422
