"""POST/GET/DELETE /api/v1/runs: derived fields, idempotency, validation, auth."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from fastapi.testclient import TestClient
from psycopg import _queries
from sqlalchemy import func, select

from app.db.engine import Database
from app.db.models import Interruption, Pipeline
from app.runs import repository
from app.runs.output import ROW_FIELDS
from app.runs.repository import _PG_INSERT_ONE, pg_insert_params
from app.runs.schemas import RunIn
from app.runs.validation import stored_values
from tests.fixtures.builders import count_runs, make_run, make_token


def test_post_run_stores_and_derives(client: TestClient, ingest_headers: dict[str, str]) -> None:
    r = client.post("/api/v1/runs", json=make_run(), headers=ingest_headers)
    assert r.status_code == 201, r.text
    body = r.json()
    # Worked example: 8 workers x 14 h = 112 GPU-hours; at the default $2.50: $280;
    # idle = (1 - 0.38) x 112 = 69.44 GPU-hours.
    assert body["wall_clock_hours"] == pytest.approx(14.0)
    assert body["gpu_hours"] == pytest.approx(112.0)
    assert body["cost_usd"] == pytest.approx(280.0)
    assert body["idle_gpu_hours"] == pytest.approx(69.44)
    assert body["effective_price_per_gpu_hour"] == 2.5
    assert body["interruptions"][0]["cause"] == "preemption"
    assert body["tags"] == {"team": "ranking"}
    assert body["started_at"].startswith("2026-11-02T08:00:00")

    fetched = client.get(f"/api/v1/runs/{body['id']}")
    assert fetched.status_code == 200
    assert fetched.json() == body


def test_unknown_pipeline_created_with_defaults(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    client.post("/api/v1/runs", json=make_run(pipeline="new-one"), headers=ingest_headers)
    p = client.get("/api/v1/pipelines/new-one").json()
    assert p["price_per_gpu_hour"] == 2.5
    assert p["runs_per_week"] == 1.0
    assert p["quality_metric"] == "ndcg"
    assert p["run_count"] == 1


def test_run_price_overrides_pipeline_default(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    r = client.post("/api/v1/runs", json=make_run(price_per_gpu_hour=4.0), headers=ingest_headers)
    assert r.json()["cost_usd"] == pytest.approx(448.0)  # 112 GPU-h x $4


def test_explicit_gpu_hours_kept(client: TestClient, ingest_headers: dict[str, str]) -> None:
    r = client.post("/api/v1/runs", json=make_run(gpu_hours=100.0), headers=ingest_headers)
    assert r.status_code == 201
    assert r.json()["gpu_hours"] == 100.0


def test_identical_retry_returns_200_and_original(
    client: TestClient, db: Database, ingest_headers: dict[str, str]
) -> None:
    first = client.post("/api/v1/runs", json=make_run(), headers=ingest_headers)
    again = client.post("/api/v1/runs", json=make_run(), headers=ingest_headers)
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json() == first.json()
    assert count_runs(db) == 1
    with db.read() as s:
        assert s.scalar(select(func.count()).select_from(Interruption)) == 1


def test_same_instant_other_offset_is_identical(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    client.post("/api/v1/runs", json=make_run(), headers=ingest_headers)
    shifted = make_run(
        started_at="2026-11-02T09:00:00+01:00", finished_at="2026-11-02T23:00:00+01:00"
    )
    assert client.post("/api/v1/runs", json=shifted, headers=ingest_headers).status_code == 200


def test_changed_retry_is_409_naming_fields(
    client: TestClient, db: Database, ingest_headers: dict[str, str]
) -> None:
    client.post("/api/v1/runs", json=make_run(), headers=ingest_headers)
    r = client.post(
        "/api/v1/runs",
        json=make_run(gpu_utilization=0.4, tags={"team": "x"}),
        headers=ingest_headers,
    )
    assert r.status_code == 409
    fields = {f["field"] for f in r.json()["error"]["fields"]}
    assert fields == {"gpu_utilization", "tags"}
    assert "gpu_utilization" in r.json()["error"]["message"]
    assert count_runs(db) == 1


def test_changed_interruptions_is_409(client: TestClient, ingest_headers: dict[str, str]) -> None:
    client.post("/api/v1/runs", json=make_run(), headers=ingest_headers)
    r = client.post("/api/v1/runs", json=make_run(interruptions=[]), headers=ingest_headers)
    assert r.status_code == 409
    assert [f["field"] for f in r.json()["error"]["fields"]] == ["interruptions"]


def test_same_run_id_in_other_pipeline_is_a_new_run(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    client.post("/api/v1/runs", json=make_run(), headers=ingest_headers)
    r = client.post("/api/v1/runs", json=make_run(pipeline="other"), headers=ingest_headers)
    assert r.status_code == 201


BAD_INPUTS: list[tuple[dict[str, Any], str, str]] = [
    ({"gpu_utilization": 38}, "gpu_utilization", "looks like a percentage: did you mean 0.38?"),
    ({"gpu_utilization": 1.5}, "gpu_utilization", "looks like a percentage: did you mean 0.015?"),
    ({"gpu_utilization": -0.1}, "gpu_utilization", "between 0 and 1"),
    ({"gpu_utilization": 250}, "gpu_utilization", "between 0 and 1"),
    # In plain words, never pydantic's ("Input should be greater than or equal to ...").
    ({"data_stall_hours": -1}, "data_stall_hours", "must be at least 0"),
    ({"workers": 0}, "workers", "must be at least 1"),
    ({"started_at": "2026-11-02T08:00:00"}, "started_at", "UTC offset"),
    ({"finished_at": "2026-11-02T07:00:00+00:00"}, "finished_at", "after started_at"),
    ({"gpu_utilisation": 0.4}, "gpu_utilisation", "unknown field"),
    ({"pipeline": "Bad Name!"}, "pipeline", "slug"),
    ({"pipeline": "-x"}, "pipeline", "slug"),
    ({"gpu_hours": 200.0}, "gpu_hours", "more than workers x wall clock"),
    (
        {"data_stall_hours": 10.0, "checkpoint_hours": 4.0},
        "data_stall_hours",
        "longer than the run",
    ),
    ({"run_id": ""}, "run_id", "at least 1"),
    ({"run_id": "a\x00b"}, "run_id", "control characters"),
    ({"tags": {"k": 1}}, "tags.k", "must be text in quotes"),
    ({"mfu": 1.2}, "mfu", "must be at most 1"),
    (
        {"interruptions": [{"lost_progress_hours": -2}]},
        "interruptions.0.lost_progress_hours",
        "must be at least 0",
    ),
]


@pytest.mark.parametrize(("override", "field", "reason"), BAD_INPUTS)
def test_bad_input_is_422_with_field_and_nothing_written(
    client: TestClient,
    db: Database,
    ingest_headers: dict[str, str],
    override: dict[str, Any],
    field: str,
    reason: str,
) -> None:
    r = client.post("/api/v1/runs", json=make_run(**override), headers=ingest_headers)
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["code"] == "validation_error"
    match = [f for f in error["fields"] if f["field"] == field]
    assert match, error
    assert reason in match[0]["reason"]
    for words in ("Input should", "Value error", "Field required"):  # pydantic's phrasing
        assert words not in error["message"] and words not in match[0]["reason"]
    assert count_runs(db) == 0
    with db.read() as s:
        assert s.scalar(select(func.count()).select_from(Pipeline)) == 0


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_numbers_refused(
    client: TestClient, ingest_headers: dict[str, str], literal: str
) -> None:
    body = (
        '{"pipeline": "p", "run_id": "r", "started_at": "2026-11-02T08:00:00+00:00", '
        '"finished_at": "2026-11-02T09:00:00+00:00", "workers": 1, '
        f'"gpu_utilization": 0.5, "quality_value": {literal}}}'
    )
    r = client.post(
        "/api/v1/runs", content=body, headers={**ingest_headers, "content-type": "application/json"}
    )
    assert r.status_code == 422
    assert r.json()["error"]["fields"][0]["field"] == "quality_value"


def test_body_over_limit_is_413(client: TestClient, ingest_headers: dict[str, str]) -> None:
    big = make_run(tags={"note": "x" * 400})
    payload = {"runs": [dict(big, run_id=f"r{i}") for i in range(2500)]}
    r = client.post("/api/v1/runs/batch", json=payload, headers=ingest_headers)
    assert r.status_code == 413
    assert "larger than 1048576 bytes" in r.json()["error"]["message"]


def test_a_chunked_body_is_counted_as_it_arrives(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    """Without Content-Length (Transfer-Encoding: chunked) the limit is applied while
    the body streams in; with one, by the header alone."""
    big = json.dumps(
        {"runs": [make_run(run_id=f"r{i}", tags={"n": "x" * 400}) for i in range(2500)]}
    )
    chunks = (big[i : i + 65536].encode() for i in range(0, len(big), 65536))
    r = client.post("/api/v1/runs/batch", content=chunks, headers=ingest_headers)
    assert r.request.headers.get("transfer-encoding") == "chunked"
    assert r.status_code == 413
    assert "larger than 1048576 bytes" in r.json()["error"]["message"]
    small = json.dumps({"runs": [make_run(run_id="r1")]})
    r = client.post("/api/v1/runs/batch", content=iter([small.encode()]), headers=ingest_headers)
    assert r.request.headers.get("transfer-encoding") == "chunked"
    assert r.status_code == 201, r.text


def test_missing_and_wrong_token_401(client: TestClient) -> None:
    assert client.post("/api/v1/runs", json=make_run()).status_code == 401
    r = client.post("/api/v1/runs", json=make_run(), headers={"Authorization": "Bearer nope"})
    assert r.status_code == 401
    assert r.headers["www-authenticate"] == "Bearer"
    r = client.post("/api/v1/runs", json=make_run(), headers={"Authorization": "Basic abc"})
    assert r.status_code == 401


def test_wrong_scope_403(client: TestClient, db: Database) -> None:
    read = {"Authorization": f"Bearer {make_token(db, 'read')}"}
    r = client.post("/api/v1/runs", json=make_run(), headers=read)
    assert r.status_code == 403
    assert "ingest" in r.json()["error"]["message"]


def test_revoked_token_401(client: TestClient, db: Database) -> None:
    from app.auth.service import revoke_token

    secret = make_token(db, "ingest", name="soon-revoked")
    with db.write() as s:
        revoke_token(s, "soon-revoked")
    r = client.post("/api/v1/runs", json=make_run(), headers={"Authorization": f"Bearer {secret}"})
    assert r.status_code == 401
    assert "revoked" in r.json()["error"]["message"]


def test_pipeline_limited_token(client: TestClient, db: Database) -> None:
    secret = make_token(db, "ingest", name="ranker-only", pipelines=["ranker"])
    headers = {"Authorization": f"Bearer {secret}"}
    assert client.post("/api/v1/runs", json=make_run(), headers=headers).status_code == 201
    r = client.post("/api/v1/runs", json=make_run(pipeline="other"), headers=headers)
    assert r.status_code == 403


def test_delete_needs_admin(
    client: TestClient, db: Database, ingest_headers: dict[str, str], admin_headers: dict[str, str]
) -> None:
    pk = client.post("/api/v1/runs", json=make_run(), headers=ingest_headers).json()["id"]
    assert client.delete(f"/api/v1/runs/{pk}", headers=ingest_headers).status_code == 403
    assert client.delete(f"/api/v1/runs/{pk}", headers=admin_headers).status_code == 204
    assert client.get(f"/api/v1/runs/{pk}").status_code == 404
    assert client.delete(f"/api/v1/runs/{pk}", headers=admin_headers).status_code == 404
    with db.read() as s:
        assert s.scalar(select(func.count()).select_from(Interruption)) == 0


def test_unknown_run_404_json(client: TestClient) -> None:
    r = client.get("/api/v1/runs/999999")
    assert r.status_code == 404
    assert r.json()["error"]["code"] == "not_found"


def test_revocation_reaches_a_cached_token_within_the_ttl(
    client: TestClient, db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    import app.auth.service as auth

    clock = [1000.0]
    monkeypatch.setattr(auth.time, "monotonic", lambda: clock[0])
    secret = make_token(db, "ingest", name="cached")
    headers = {"Authorization": f"Bearer {secret}"}
    assert client.post("/api/v1/runs", json=make_run(), headers=headers).status_code == 201
    with db.write() as s:
        auth.revoke_token(s, "cached")
    # Within the 5 s cache the verified token is still trusted...
    clock[0] += 4.0
    assert client.post("/api/v1/runs", json=make_run(), headers=headers).status_code == 200
    # ...and after it the revocation holds.
    clock[0] += 2.0
    r = client.post("/api/v1/runs", json=make_run(), headers=headers)
    assert r.status_code == 401
    assert "revoked" in r.json()["error"]["message"]


def test_last_used_is_recorded(client: TestClient, db: Database) -> None:
    from app.auth.service import list_tokens

    secret = make_token(db, "ingest", name="used")
    client.post("/api/v1/runs", json=make_run(), headers={"Authorization": f"Bearer {secret}"})
    with db.read() as s:
        [token] = [t for t in list_tokens(s) if t.name == "used"]
        assert token.last_used_at is not None
        assert token.token_hash != secret and secret not in token.token_hash


def test_resending_the_shown_quality_metric_is_the_same_run(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    """A run stored without a metric is shown with the pipeline's; re-sending what the API
    showed (an export re-imported into the same database) is an identical retry."""
    first = client.post("/api/v1/runs", json=make_run(quality_metric=None), headers=ingest_headers)
    assert first.json()["quality_metric"] == "quality"  # the pipeline's default metric
    again = client.post(
        "/api/v1/runs", json=make_run(quality_metric="quality"), headers=ingest_headers
    )
    assert again.status_code == 200
    other = client.post("/api/v1/runs", json=make_run(quality_metric="auc"), headers=ingest_headers)
    assert other.status_code == 409


def test_the_single_run_statement_stays_in_psycopgs_query_cache() -> None:
    # psycopg parses a statement's %(name)s placeholders on every call once it is longer
    # than MAX_CACHED_STATEMENT_LENGTH or has more than MAX_CACHED_STATEMENT_PARAMS
    # parameters: 66 us per stored run, ~5% of the single-run path's server CPU. The
    # run_variant CTE pushed it over once.
    run = RunIn.model_validate(make_run())
    values = {**stored_values(run), "billed_price_per_gpu_hour": 2.0}
    interruptions = [{"position": 0, **i.model_dump()} for i in run.interruptions]
    params = pg_insert_params("ranker", values, interruptions, datetime.now(UTC))
    assert len(_PG_INSERT_ONE.encode()) <= _queries.MAX_CACHED_STATEMENT_LENGTH
    assert len(params) <= _queries.MAX_CACHED_STATEMENT_PARAMS


def test_rows_are_read_in_the_order_the_query_selects() -> None:
    """``output.out_dict`` unpacks a run's row by position: its order is the query's."""
    selected = tuple(c.key for c in repository._runs_query().selected_columns)
    assert selected == ROW_FIELDS
