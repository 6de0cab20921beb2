"""Per-session memoisation of reads: values that live in one session's ``info`` and die
with it (one request's unit of work). What is kept between requests is in
``app/db/kept.py``."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any, Concatenate, ParamSpec, TypeVar
from typing import cast as type_cast

from sqlalchemy.orm import Session

from app.db.kept import KEEPS

P = ParamSpec("P")
R = TypeVar("R")


def per_session(fn: Callable[Concatenate[Session, P], R]) -> Callable[Concatenate[Session, P], R]:
    """Memoise a read for the life of one session (one request's unit of work).

    A pipeline page asks several services for the same variants, recent runs and
    failure exposure; each is read once per request. Callers must not mutate results.
    """

    @wraps(fn)
    def wrapper(session: Session, *args: P.args, **kwargs: P.kwargs) -> R:
        memo: dict[Any, Any] = session.info.setdefault("cadence_memo", {})
        key = (fn.__module__, fn.__qualname__, args, tuple(sorted(kwargs.items())))
        if key not in memo:
            memo[key] = fn(session, *args, **kwargs)
        result: R = memo[key]
        return result

    return type_cast(Callable[Concatenate[Session, P], R], wrapper)


def once_per_read_session(session: Session, key: tuple[object, ...], make: Callable[[], R]) -> R:
    """``make()``, once per read session under ``key`` (which must hold every argument
    ``make`` closes over); in any other session, every time. For a read whose arguments
    are not all hashable, or not all part of what it answers (the month's inputs: read
    at a moment, answered by its day)."""
    if not session.info.get(KEEPS):
        return make()
    memo: dict[Any, Any] = session.info.setdefault("cadence_memo", {})
    if key not in memo:
        memo[key] = make()
    result: R = memo[key]
    return result


def per_read_session(
    fn: Callable[Concatenate[Session, P], R],
) -> Callable[Concatenate[Session, P], R]:
    """:func:`per_session`, but only in a session that only reads (``Database.read``,
    ``read_latest``): a write session reads again every time, since it may have changed
    what it read (a bulk load reads the change counters, rebuilds them, reads again)."""
    memoised = per_session(fn)

    @wraps(fn)
    def wrapper(session: Session, *args: P.args, **kwargs: P.kwargs) -> R:
        if session.info.get(KEEPS):
            return memoised(session, *args, **kwargs)
        return fn(session, *args, **kwargs)

    return type_cast(Callable[Concatenate[Session, P], R], wrapper)
