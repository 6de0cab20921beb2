from __future__ import annotations

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from app.db.engine import Database
from app.db.memo import per_read_session, per_session

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
