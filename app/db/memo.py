"""Per-session memoisation of reads."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any, Concatenate, ParamSpec, TypeVar
from typing import cast as type_cast

from sqlalchemy.orm import Session

CACHES = "cadence_caches"  # the session.info key of Database.caches (app/db/engine.py)
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


def kept(session: Session, name: str) -> dict[Any, Any]:
    """A dict this database keeps between requests (``Database.caches[name]``, which its
    sessions carry in ``session.info``); a session made some other way gets a new empty
    dict each time, so nothing is kept and every caller still gets right answers.

    Whoever stores in it keys each value by everything the value depends on (see
    app/analytics/costs.py): a kept value is never stale, only unused.
    """
    caches: dict[str, Any] | None = session.info.get(CACHES)
    if caches is None:
        return {}
    found: dict[Any, Any] = caches.setdefault(name, {})
    return found
