"""What this month's spend reads of attempts still running and of the experiments that
ran lately (app/analytics/month.py; the arithmetic is app/planning/running.py).

Running attempts are found through the partial index ``ix_run_running`` (finished_at IS
NULL): a handful of rows, however many runs are stored.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.db.models import Run
from app.db.run_terms import wall_clock
from app.db.sql import dialect, in_ids


@dataclass(frozen=True)
class RunningRow:
    """One running attempt: its variant, start, workers and the price frozen on it."""

    variant: str
    started_at: datetime
    workers: int
    price_per_gpu_hour: float


def running(
    session: Session, pipeline_ids: Sequence[int] | None, since: datetime
) -> dict[int, tuple[RunningRow, ...]]:
    """The attempts still running that started at or after ``since`` (the month's
    first instant: an attempt is billed to the month it started in), by pipeline id."""
    stmt = (
        select(
            Run.pipeline_id, Run.variant, Run.started_at, Run.workers,
            Run.billed_price_per_gpu_hour,
        )
        .where(Run.finished_at.is_(None), Run.started_at >= since)
        .order_by(Run.pipeline_id, Run.started_at, Run.id)
    )  # fmt: skip
    if pipeline_ids is not None:
        stmt = stmt.where(in_ids(session, Run.pipeline_id, list(pipeline_ids)))
    out: dict[int, list[RunningRow]] = {}
    for pid, variant, started, workers, price in session.execute(stmt):
        row = RunningRow(variant, started, int(workers), float(price))  # UTCDateTime: aware
        out.setdefault(pid, []).append(row)
    return {pid: tuple(rows) for pid, rows in out.items()}


def recent_wall_clocks(session: Session, pipeline_id: int, variant: str, limit: int) -> list[float]:
    """The wall clock (hours) of the variant's newest ``limit`` succeeded attempts: how
    long its retrainings usually take."""
    stmt = (
        select(wall_clock(dialect(session)))
        .where(
            Run.pipeline_id == pipeline_id,
            Run.variant == variant,
            Run.outcome == "succeeded",
        )
        .order_by(Run.started_at.desc(), Run.id.desc())
        .limit(limit)
    )
    return [float(h) for h in session.scalars(stmt) if h is not None]


def recent_by_variant(
    session: Session, pipeline_ids: Sequence[int] | None, since: datetime
) -> dict[int, dict[str, tuple[int, float]]]:
    """{pipeline id: {variant: (finished attempts started since ``since``, their cost at
    the price frozen on each)}}: the pace of the experiments still running."""
    stmt = (
        select(
            Run.pipeline_id,
            Run.variant,
            func.count(),
            func.sum(Run.gpu_hours * Run.billed_price_per_gpu_hour),
        )
        .where(Run.started_at >= since, Run.finished_at.is_not(None))
        .group_by(Run.pipeline_id, Run.variant)
    )
    if pipeline_ids is not None:
        stmt = stmt.where(in_ids(session, Run.pipeline_id, list(pipeline_ids)))
    out: dict[int, dict[str, tuple[int, float]]] = {}
    for pid, variant, runs, cost in session.execute(stmt):
        out.setdefault(pid, {})[variant] = (int(runs), float(cost or 0.0))
    return out
