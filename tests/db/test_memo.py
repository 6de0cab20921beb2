from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine
from sqlalchemy.orm import Session

from app.analytics import costs
from app.db.engine import Database
from app.db.memo import kept, per_read_session, per_session
from app.pipelines.service import briefs
from app.planning.scenario import RUN_WINDOW
from app.runs.service import delete
from tests.fixtures.builders import make_run

calls: list[int] = []


@per_session
def answer(session: Session, n: int) -> list[int]:
    calls.append(n)
    return [n]


def test_reads_are_memoised_per_session_only(db: Database) -> None:
    calls.clear()
    with db.read() as s:
        first = answer(s, 1)
        assert answer(s, 1) is first  # same session, same arguments: one read
        assert answer(s, 2) == [2]
    with db.read() as s:
        assert answer(s, 1) == [1]  # a new session (request) reads again
    assert calls == [1, 2, 1]


@per_read_session
def counters(session: Session, n: int) -> list[int]:
    calls.append(n)
    return [n]


def test_only_read_sessions_memoise_a_read_that_a_write_may_change(engine: Engine) -> None:
    # The rollup change counters are read this way: a bulk load reads them, rebuilds
    # them and reads again in one write session, and must see the new ones.
    database = Database(engine)  # unbound: its read sessions are marked read-only
    calls.clear()
    with database.read() as s:
        assert counters(s, 1) is counters(s, 1)
    with database.read_latest() as s:
        assert counters(s, 1) is counters(s, 1)
    with database.write() as s:
        assert counters(s, 1) == counters(s, 1) == [1]
    assert calls == [1, 1, 1, 1]


class Undone(Exception):
    """Raised inside a write to roll it back."""


def test_a_value_kept_inside_a_write_that_rolls_back_is_never_served(
    client: TestClient, db: Database, admin_headers: dict[str, str], ingest_headers: dict[str, str]
) -> None:
    # Three runs of one pipeline, then a write that deletes the newest (its variant's
    # change counter moves from N to N+1), reads the window of costs (two runs) and rolls
    # back. A commit then posts a fourth run: the counter is N+1 again, for four runs.
    # Had the write kept its two-run window under (N+1, price), the read would get it.
    assert client.put("/api/v1/pipelines/km", json={"runs_per_week": 2}, headers=admin_headers)
    pks = [_post(client, ingest_headers, f"km-{i}", day=i + 1) for i in range(3)]
    with db.read() as s:
        listed = briefs(s)
    with pytest.raises(Undone), db.write() as s:
        delete(s, pks[-1])
        assert len(costs.windows(s, listed, RUN_WINDOW)[listed[0].id]) == 2
        raise Undone
    _post(client, ingest_headers, "km-3", day=4)
    with db.read() as s:
        assert len(costs.windows(s, listed, RUN_WINDOW)[listed[0].id]) == 4


def test_a_write_session_keeps_nothing(db: Database) -> None:
    with db.write() as s:
        kept(s, "anything")["v"] = 40.0
        assert kept(s, "anything") == {}  # a throwaway dict each time
    with db.read() as s:
        kept(s, "anything")["v"] = 4000.0
    with db.read_latest() as s:
        assert kept(s, "anything") == {"v": 4000.0}


def _post(client: TestClient, headers: dict[str, str], run_id: str, day: int) -> int:
    start = datetime(2026, 11, day, 6, tzinfo=UTC)
    run = make_run(pipeline="km", run_id=run_id, started_at=start.isoformat(),
                   finished_at=(start + timedelta(hours=10)).isoformat())  # fmt: skip
    r = client.post("/api/v1/runs/batch", json={"runs": [run]}, headers=headers)
    assert r.status_code == 201, r.text
    pk: int = r.json()["runs"][0]["id"]
    return pk
