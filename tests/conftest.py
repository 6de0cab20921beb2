"""Test fixtures. The same suite runs on SQLite and on PostgreSQL.

Backend: ``CADENCE_TEST_BACKEND=sqlite`` (default) or ``postgresql``; PostgreSQL at
``CADENCE_TEST_DATABASE_URL`` (default postgresql+psycopg://postgres@127.0.0.1:5432/test;
its ``public`` schema is wiped). ``CADENCE_REQUIRE_POSTGRES=1`` (set by CI) turns an
unreachable PostgreSQL into a failure instead of a loud skip.

The schema is built once per session with Alembic; each test runs inside one
transaction that is rolled back, except tests that need real commits from several
connections (``committed_db``), which clean up after themselves.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from alembic import command
from fastapi.testclient import TestClient
from sqlalchemy import Engine, text
from sqlalchemy.exc import OperationalError

from app import settings as app_settings
from app.db.engine import Database, make_engine
from app.db.revision import alembic_config
from app.main import create_app
from app.settings import Settings
from tests.fixtures.alerts import Receiver
from tests.fixtures.builders import make_token
from tests.fixtures.security import token_settings

DEFAULT_PG = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
BACKEND = os.environ.get("CADENCE_TEST_BACKEND", "sqlite")


def postgres_url() -> str:
    return Settings(
        database_url=os.environ.get("CADENCE_TEST_DATABASE_URL", DEFAULT_PG)
    ).database_url


def pytest_report_header() -> str:
    return f"cadence database backend: {BACKEND}"


@pytest.fixture(scope="session")
def database_url(tmp_path_factory: pytest.TempPathFactory) -> str:
    if BACKEND == "sqlite":
        return f"sqlite:///{tmp_path_factory.mktemp('db') / 'cadence-test.db'}"
    url = postgres_url()
    engine = make_engine(Settings(database_url=url))
    try:  # a raw connection on purpose: the schema is wiped before any migration exists
        with engine.begin() as conn:
            conn.execute(text("DROP SCHEMA IF EXISTS public CASCADE"))
            conn.execute(text("CREATE SCHEMA public"))
    except OperationalError as exc:
        message = f"PostgreSQL unreachable at {url}: {str(exc).splitlines()[0]}"
        if os.environ.get("CADENCE_REQUIRE_POSTGRES") == "1":
            pytest.exit(message, returncode=3)
        pytest.skip(message)
    finally:
        engine.dispose()
    return url


@pytest.fixture(scope="session")
def settings(database_url: str) -> Settings:
    # No background alert sender: the ``db`` fixture's sessions share one connection,
    # which a second thread must not use. Alert tests drain the outbox themselves.
    # No warm start either: a test that wants one starts it (tests/portfolio/test_warm.py).
    return Settings(
        database_url=database_url,
        default_price_per_gpu_hour=2.5,
        alert_sender=False,
        warm_start=False,
    )


@pytest.fixture(scope="session")
def engine(settings: Settings) -> Iterator[Engine]:
    command.upgrade(alembic_config(settings.database_url), "head")
    engine = make_engine(settings)
    yield engine
    engine.dispose()


@pytest.fixture
def db(engine: Engine) -> Iterator[Database]:
    """A Database whose every session lives inside one rolled-back transaction."""
    conn = engine.connect()  # raw on purpose: the outer transaction the test rolls back
    outer = conn.begin()
    try:
        yield Database(engine, bind=conn)
    finally:
        outer.rollback()
        conn.close()


@pytest.fixture
def committed_db(engine: Engine) -> Iterator[Database]:
    """A real Database (separate connections, real commits); tables emptied afterwards."""
    yield Database(engine)
    with engine.begin() as conn:  # raw on purpose: clean-up SQL, no feature's unit of work
        for table in ("interruption", "run", "pipeline", "api_token", "kept_snapshot"):
            conn.execute(text(f"DELETE FROM {table}"))


@pytest.fixture
def session(db: Database) -> Iterator[Any]:
    with db.write() as s:
        yield s


@pytest.fixture
def client(db: Database, settings: Settings) -> Iterator[TestClient]:
    with TestClient(create_app(settings, database=db)) as c:
        yield c


@pytest.fixture
def demo(client: TestClient, db: Database) -> TestClient:
    """``client`` with the demo pipelines loaded as ``make run`` loads them: relative to
    now, every run in the past (the latest in the last complete ISO week). Tests derive
    weeks and dates from now (``demo_week``) rather than pinning them."""
    from app.demo import load_demo

    with db.write() as s:
        load_demo(s)
    return client


@pytest.fixture
def ingest_headers(db: Database) -> dict[str, str]:
    return {"Authorization": f"Bearer {make_token(db, 'ingest')}"}


@pytest.fixture
def admin_headers(db: Database) -> dict[str, str]:
    return {"Authorization": f"Bearer {make_token(db, 'admin')}"}


@pytest.fixture
def token_client(db: Database, database_url: str) -> Iterator[TestClient]:
    """The app in token read mode (pages and API reads need a session or a read token);
    redirects are answered, not followed."""
    app = create_app(token_settings(database_url), database=db)
    with TestClient(app, follow_redirects=False) as c:
        yield c


@pytest.fixture
def cli_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A fresh SQLite database for the `cadence` commands, as CADENCE_DATABASE_URL (the
    commands read their settings from the environment); its URL."""
    url = f"sqlite:///{tmp_path / 'cli.db'}"
    monkeypatch.setenv("CADENCE_DATABASE_URL", url)
    app_settings.get_settings.cache_clear()
    yield url
    app_settings.get_settings.cache_clear()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """A local webhook receiver (tests/fixtures/alerts.py) for the alert tests and pages."""
    r = Receiver()
    yield r
    r.close()


ARTIFACTS = Path(__file__).parent / "artifacts"
