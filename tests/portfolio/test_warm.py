"""The warm start (issue 38): what a fresh worker's first overview would read for every
pipeline is made in a background thread at start, so the first reader finds it kept.

Counted as in tests/web/test_page_statements.py: every statement a request sends."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from app.db.engine import Database
from app.demo import load_demo
from app.main import create_app
from app.portfolio.warm import Warmer, warm
from app.settings import Settings
from tests.fixtures.serving import statements

URL = "/api/v1/portfolio?sort=spend"


@pytest.fixture
def demo_db(committed_db: Database) -> Database:
    with committed_db.write() as s:
        load_demo(s)
    return committed_db


def served(db: Database, settings: Settings) -> TestClient:
    return TestClient(create_app(settings, database=db))


def test_a_warm_start_leaves_the_first_reader_what_a_first_request_would(
    demo_db: Database, settings: Settings
) -> None:
    with served(demo_db, settings) as client:
        demo_db.kept.clear()
        cold = statements(demo_db.engine, client, URL)
        answer = client.get(URL).json()
        warmed = statements(demo_db.engine, client, URL)  # a second reader: all kept
        demo_db.kept.clear()
        assert warm(demo_db) >= 0
        first = statements(demo_db.engine, client, URL)
        assert client.get(URL).json() == answer
    # The first reader after the warm start reads only what any warm reader reads (the
    # pipelines and their change counters), not the weeks, windows and month a cold one
    # reads.
    assert len(first) == len(warmed) < len(cold), "\n".join(first)


def test_the_server_starts_the_warm_start_without_waiting_for_it(
    demo_db: Database, settings: Settings
) -> None:
    once = replace_settings(settings, warm_start=True, kept_snapshot_minutes=0)
    with served(demo_db, once) as client:
        warmer: Warmer = client.app.state.warmer  # type: ignore[attr-defined]
        warmer.thread.join(timeout=120)
        assert not warmer.thread.is_alive()
        assert warmer.seconds is not None and warmer.written == 0
    # With the snapshot on (tests/db/test_kept_snapshot.py): the thread writes what is
    # kept, then sleeps until its next write, and stops with the server.
    with served(demo_db, replace_settings(settings, warm_start=True)) as client:
        warmer = client.app.state.warmer  # type: ignore[attr-defined]
        deadline = time.monotonic() + 120
        while warmer.written == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert warmer.seconds is not None and warmer.written == 1
        assert warmer.thread.is_alive()
    assert not warmer.thread.is_alive()
    with served(demo_db, settings) as client:
        assert not hasattr(client.app.state, "warmer")  # off: nothing started


def test_a_failed_warm_start_is_a_warning_not_a_stopped_server(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Broken:
        def read(self) -> Iterator[None]:
            raise RuntimeError("database gone")

    warmer = Warmer(Broken())  # type: ignore[arg-type]
    with caplog.at_level(logging.WARNING, logger="cadence.warm"):
        warmer.start()
        warmer.thread.join(timeout=10)
    assert warmer.seconds is None
    assert "warm start failed" in caplog.text and "database gone" in caplog.text


def replace_settings(settings: Settings, **changes: object) -> Settings:
    return settings.model_copy(update=changes)
