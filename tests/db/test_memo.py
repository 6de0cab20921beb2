from __future__ import annotations

from sqlalchemy import Engine
from sqlalchemy.orm import Session

from app.db.engine import Database
from app.db.memo import once_per_read_session, per_read_session, per_session

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


def test_once_per_read_session_makes_once_under_its_key_in_a_read_only(engine: Engine) -> None:
    database = Database(engine)
    made: list[str] = []

    def make(tag: str) -> list[str]:
        made.append(tag)
        return [tag]

    with database.read() as s:
        first = once_per_read_session(s, ("k", 1), lambda: make("a"))
        assert once_per_read_session(s, ("k", 1), lambda: make("b")) is first  # a's, kept
        assert once_per_read_session(s, ("k", 2), lambda: make("c")) == ["c"]  # another key
    with database.read() as s:
        assert once_per_read_session(s, ("k", 1), lambda: make("d")) == ["d"]  # a new request
    with database.write() as s:  # a write may change what it read: made every time
        assert once_per_read_session(s, ("k", 1), lambda: make("e")) == ["e"]
        assert once_per_read_session(s, ("k", 1), lambda: make("f")) == ["f"]
    assert made == ["a", "c", "d", "e", "f"]
