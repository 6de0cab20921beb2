"""What this month's spend reads of attempts still running and of the experiments that
ran lately (app/analytics/month.py; the arithmetic is app/planning/running.py).

Running attempts are found through the partial index ``ix_run_running`` (finished_at IS
NULL): a handful of rows, however many runs are stored.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import DateTime, Float, Integer, cast, func, literal, null, select, union_all
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


@dataclass(frozen=True)
class NowAndLately:
    """Per pipeline id: the attempts still running that started at or after the month's
    first instant (an attempt is billed to the month it started in), and {variant:
    (finished attempts started in the last days, their cost at the price frozen on
    each)}, the pace of the experiments still running."""

    running: dict[int, tuple[RunningRow, ...]]
    recent: dict[int, dict[str, tuple[int, float]]]


def running_and_recent(
    session: Session, pipeline_ids: Sequence[int] | None, month: datetime, since: datetime
) -> NowAndLately:
    """Both in one statement (a UNION ALL: the pipeline page reads at most ten)."""
    running = select(
        literal("r").label("kind"),
        Run.pipeline_id,
        Run.variant,
        Run.started_at,
        Run.workers,
        Run.billed_price_per_gpu_hour.label("price"),
        literal(0).label("runs"),
        literal(0.0).label("cost"),
    ).where(Run.finished_at.is_(None), Run.started_at >= month)
    recent = (
        select(
            # Typed NULLs: PostgreSQL must know each column's type in a UNION.
            literal("e"),
            Run.pipeline_id,
            Run.variant,
            cast(null(), DateTime(timezone=True)),
            cast(null(), Integer),
            cast(null(), Float),
            func.count(),
            func.coalesce(func.sum(Run.gpu_hours * Run.billed_price_per_gpu_hour), 0.0),
        )
        .where(Run.started_at >= since, Run.finished_at.is_not(None))
        .group_by(Run.pipeline_id, Run.variant)
    )
    if pipeline_ids is not None:
        running = running.where(in_ids(session, Run.pipeline_id, list(pipeline_ids)))
        recent = recent.where(Run.pipeline_id.in_(list(pipeline_ids)))
    rows: list[Any] = list(session.execute(union_all(running, recent)))
    found: dict[int, list[RunningRow]] = {}
    out = NowAndLately({}, {})
    for kind, pid, variant, started, workers, price, runs, cost in rows:
        if kind == "e":
            out.recent.setdefault(pid, {})[variant] = (int(runs), float(cost))
        else:
            at = _aware(started)
            found.setdefault(pid, []).append(RunningRow(variant, at, int(workers), float(price)))
    for pid, mine in found.items():
        out.running[pid] = tuple(sorted(mine, key=lambda r: (r.started_at, r.variant)))
    return out


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


def _aware(value: Any) -> datetime:
    """A start read through UNION ALL loses the column's type (SQLite: a string)."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    aware: datetime = value if value.tzinfo else value.replace(tzinfo=UTC)
    return aware
