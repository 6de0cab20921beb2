"""Scaling-out settings: a read replica for read-only work, prepared statements off."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic import command
from fastapi.testclient import TestClient

from app.db.engine import make_database, make_engine
from app.db.revision import alembic_config
from app.main import create_app
from app.settings import Settings
from tests.conftest import BACKEND, postgres_url
from tests.fixtures.builders import make_token


def test_reads_go_to_the_replica_and_writes_to_the_primary(tmp_path: Path) -> None:
    primary, replica = (f"sqlite:///{tmp_path / n}.db" for n in ("primary", "replica"))
    for url in (primary, replica):
        command.upgrade(alembic_config(url), "head")
    settings = Settings(database_url=primary, read_database_url=replica)
    db = make_database(settings)
    try:
        token = make_token(db, "admin")
        with TestClient(create_app(settings, database=db)) as client:
            r = client.put(
                "/api/v1/pipelines/written", json={}, headers={"Authorization": f"Bearer {token}"}
            )
            assert r.status_code == 200  # written to (and read back from) the primary
            # The replica has not caught up (here: never will), and reads go there.
            assert client.get("/api/v1/pipelines").json()["pipelines"] == []
        with db.write() as s:
            assert s.get_bind().url.database.endswith("primary.db")
    finally:
        db.dispose()


@pytest.mark.skipif(BACKEND != "postgresql", reason="runs in the PostgreSQL pass")
def test_prepared_statements_can_be_turned_off_for_pgbouncer() -> None:
    engine = make_engine(Settings(database_url=postgres_url(), db_prepared_statements=False))
    try:  # raw connections on purpose: the driver's own setting is what is checked
        with engine.connect() as conn:
            assert conn.connection.driver_connection.prepare_threshold is None  # type: ignore[union-attr]
    finally:
        engine.dispose()
    engine = make_engine(Settings(database_url=postgres_url()))
    try:
        with engine.connect() as conn:
            assert conn.connection.driver_connection.prepare_threshold is not None  # type: ignore[union-attr]
    finally:
        engine.dispose()
