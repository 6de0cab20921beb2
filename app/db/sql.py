"""SQL expressions that more than one feature's repository builds on."""

from __future__ import annotations

from typing import Any, cast

from sqlalchemy import ARRAY, BigInteger, ColumnElement, any_, bindparam, func
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session

from app.db.models import Pipeline, Run


def dialect(session: Session | Connection) -> str:
    """``"postgresql"`` or ``"sqlite"``: the few queries that differ branch on it (a
    Connection too: the migrations' backfill passes one)."""
    return session.get_bind().dialect.name if isinstance(session, Session) else session.dialect.name


def effective_price() -> ColumnElement[float]:
    """The price projections use: the run's own, else its pipeline's *current* price (needs
    the pipeline joined), so a price change re-prices what the runs would cost from now on."""
    return func.coalesce(Run.price_per_gpu_hour, Pipeline.price_per_gpu_hour)


def explained_hours() -> ColumnElement[float]:
    """The wall-clock hours a run's stalls, checkpoints and interruptions explain: its
    wall clock is read as at least this (stored durations were checked against it)."""
    return (
        Run.data_stall_hours
        + Run.checkpoint_hours
        + Run.lost_progress_hours
        + Run.resume_hours
        + Run.reschedule_hours
    )


def recorded_price() -> ColumnElement[float]:
    """The price frozen on the run when it was stored (methodology.md §2): recorded spend."""
    return Run.billed_price_per_gpu_hour.expression


def upsert_insert(session: Session, table: Any) -> Any:
    """The dialect's INSERT, which has ``on_conflict_do_nothing/update`` on both."""
    return dialect_insert(dialect(session), table)


def dialect_insert(backend: str, table: Any) -> Any:
    """:func:`upsert_insert` for a statement built once per dialect."""
    return (postgresql.insert if backend == "postgresql" else sqlite.insert)(table)


def in_ids(session: Session, column: Any, ids: list[int]) -> ColumnElement[bool]:
    """``column IN ids``; on PostgreSQL ``= ANY(array)``, one parameter however many ids
    (a plan the server can cache, not one per list length)."""
    return in_ids_param(dialect(session), column, ids)


def in_ids_param(backend: str, column: Any, ids: list[int] | None = None) -> ColumnElement[bool]:
    """:func:`in_ids`, the parameter named ``ids``; for a statement built once, leave
    ``ids`` out and give them at execution."""
    if backend == "postgresql":
        return cast(
            ColumnElement[bool], column == any_(bindparam("ids", ids, type_=ARRAY(BigInteger)))
        )
    return cast(ColumnElement[bool], column.in_(bindparam("ids", ids, expanding=True)))
