from __future__ import annotations

from sqlalchemy.orm import Session

from app.db.engine import Database
from app.db.memo import per_session

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
