"""Per-session memoisation of reads."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import wraps
from types import MappingProxyType
from typing import Any, Concatenate, ParamSpec, TypeVar
from typing import cast as type_cast

from sqlalchemy.orm import Session

CACHES = "cadence_caches"  # the session.info key of Database.caches (app/db/engine.py)
READ_ONLY = "cadence_read_only"  # set in the info of Database.read()'s sessions
KEEPS = "cadence_keeps"  # set by Database.read() and read_latest(): kept() shares its dicts
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


def per_read_session(
    fn: Callable[Concatenate[Session, P], R],
) -> Callable[Concatenate[Session, P], R]:
    """:func:`per_session`, but only in a session that only reads (``Database.read``,
    ``read_latest``): a write session reads again every time, since it may have changed
    what it read (a bulk load reads the change counters, rebuilds them, reads again)."""
    memoised = per_session(fn)

    @wraps(fn)
    def wrapper(session: Session, *args: P.args, **kwargs: P.kwargs) -> R:
        if session.info.get(READ_ONLY):
            return memoised(session, *args, **kwargs)
        return fn(session, *args, **kwargs)

    return type_cast(Callable[Concatenate[Session, P], R], wrapper)


def kept(session: Session, name: str) -> dict[Any, Any]:
    """A dict this database keeps between requests (``Database.caches[name]``, which its
    sessions carry in ``session.info``), in a read session only (``Database.read``,
    ``read_latest``). A write session, or a session made some other way, gets a new empty
    dict each time, so nothing is kept and every caller still gets right answers: a value
    kept inside a write could be one its rollback undoes, and would then be served as
    fresh after the next commit.

    Whoever stores in it keys each value by everything the value depends on (see
    app/analytics/costs.py): a kept value is never stale, only unused.
    """
    caches: dict[str, Any] | None = session.info.get(CACHES)
    if caches is None or not session.info.get(KEEPS):
        return {}
    found: dict[Any, Any] = caches.setdefault(name, {})
    return found


def kept_view(session: Session, name: str) -> Mapping[Any, Any]:
    """What :func:`kept` holds under ``name``, to look up only, in any session that carries
    the caches, a write session's too. A value filed under a key of change counters is
    what that session would compute when it reads the same counters (its own writes move
    them), so reading it is exact; only a read session may store (:func:`kept`), since a
    value made inside a write could be undone by its rollback."""
    caches: dict[str, Any] | None = session.info.get(CACHES)
    if caches is None:
        return {}
    return MappingProxyType(caches.get(name, {}))


REMEMBERED = 4  # values kept per name: a few teams, token limits or weeks browsed


def recalled(session: Session, name: str, key: object) -> Any:
    """The value last :func:`remember`-ed under ``name`` for a key equal to ``key``, or
    None (this database keeps the REMEMBERED latest per name, in :func:`kept`).

    For whole org-wide answers (the portfolio's rows, the review's lines): ``key`` holds
    everything the value was made from (the pipelines, their change counters, the kept
    month to date), so a recalled value is what making it again would give. Keys are
    compared with ``==``; values kept elsewhere compare by identity first, so a warm key
    of 5,000 pipelines compares in a few milliseconds.
    """
    for k, value in list(kept(session, "remembered").get(name, ())):
        if k == key:
            return value
    return None


def remember(session: Session, name: str, key: object, value: R) -> R:
    """Keep ``value`` (never None) under ``name`` and ``key`` for :func:`recalled`."""
    slots: list[tuple[object, Any]] = kept(session, "remembered").setdefault(name, [])
    slots.insert(0, (key, value))
    del slots[REMEMBERED:]
    return value
