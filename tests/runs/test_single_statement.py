"""The single-run write path on a real pool: on PostgreSQL a new run of a known pipeline
is one statement in autocommit (``Database.one_statement``), outside any transaction.

The API tests run every request inside one rolled-back transaction (savepoints), which
cannot show what autocommit does to a pooled connection. Here the service has a pool of
exactly one connection and real commits: the connection the single-run statement used
must come back transactional (a failing batch after it still writes nothing), and a
connection lost under that statement must answer 503 once and then recover. The same
sequence runs on SQLite, where every run takes the transactional path.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, text

from app.db.engine import Database, make_engine
from app.main import create_app
from app.settings import Settings
from tests.conftest import BACKEND
from tests.fixtures.builders import count_runs, make_run, make_token
from tests.fixtures.rollups import assert_rollups_match


@pytest.fixture
def one_connection(engine: Engine, settings: Settings) -> Iterator[Database]:
    """A Database whose pool holds one connection (``engine`` migrated the schema)."""
    single = make_engine(settings, pool_size=1, max_overflow=0)
    try:
        yield Database(single)
    finally:
        single.dispose()
        with engine.begin() as conn:  # raw on purpose: clean-up SQL after real commits
            for table in ("interruption", "run", "pipeline", "api_token"):
                conn.execute(text(f"DELETE FROM {table}"))


@pytest.fixture
def service(one_connection: Database, settings: Settings) -> Iterator[TestClient]:
    headers = {"Authorization": f"Bearer {make_token(one_connection, 'ingest')}"}
    with TestClient(create_app(settings, database=one_connection), headers=headers) as client:
        yield client


def post(client: TestClient, **fields: Any) -> Any:
    return client.post("/api/v1/runs", json=make_run(pipeline="solo", **fields))


def test_the_connection_comes_back_transactional(
    service: TestClient, one_connection: Database
) -> None:
    first = post(service, run_id="r1")  # a new pipeline: the transactional path
    assert first.status_code == 201, first.text
    second = post(service, run_id="r2")  # PostgreSQL: the one statement, in autocommit
    assert second.status_code == 201, second.text
    assert service.get(f"/api/v1/runs/{second.json()['id']}").json() == second.json()
    assert post(service, run_id="r2").status_code == 200  # an identical retry
    changed = post(service, run_id="r2", workers=16)
    assert changed.status_code == 409, changed.text
    assert "workers" in changed.json()["error"]["message"]

    # All or nothing on the same (only) connection: r3 is valid, the copy of r2 is not.
    # Had the connection stayed in autocommit, r3 would be stored despite the 409.
    batch = {
        "runs": [
            make_run(pipeline="solo", run_id="r3"),
            make_run(pipeline="solo", run_id="r2", workers=16),
        ]
    }
    refused = service.post("/api/v1/runs/batch", json=batch)
    assert refused.status_code == 409, refused.text
    assert count_runs(one_connection) == 2
    assert_rollups_match(one_connection)


@pytest.mark.skipif(
    BACKEND != "postgresql",
    reason="PostgreSQL only: SQLite has no server connection to lose (the SQLite pass runs "
    "the test above)",
)
def test_a_connection_lost_under_the_statement_answers_503_then_recovers(
    service: TestClient, one_connection: Database, engine: Engine
) -> None:
    assert post(service, run_id="r1").status_code == 201
    assert post(service, run_id="r2").status_code == 201  # the statement's path
    with one_connection.engine.connect() as conn:  # the pool's one connection
        pid = conn.execute(text("SELECT pg_backend_pid()")).scalar()
    with engine.begin() as conn:  # the server ends that session, as a restart would
        assert conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid}).scalar()
    lost = post(service, run_id="r3")
    assert lost.status_code == 503, lost.text
    assert lost.json()["error"]["code"] == "database_unavailable"
    assert lost.headers["Retry-After"]
    again = post(service, run_id="r3")  # the client's retry, on a new connection
    assert again.status_code == 201, again.text
    assert count_runs(one_connection) == 3
    assert_rollups_match(one_connection)
