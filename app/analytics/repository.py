"""Analytical queries: aggregation happens in SQL, rows come back small.

Every query reads the ``run`` table's columns (interruption sums are kept on the run),
so weekly goodput and badput are one GROUP BY and a projection reads a bounded number
of recent runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

from sqlalchemy import ColumnElement, Float, case, cast, distinct, func, select
from sqlalchemy.orm import Session

from app.db.memo import per_session
from app.db.models import Pipeline, Run
from app.planning.goodput import GoodputTotals
from app.planning.model import Interruption, RunFacts
from app.planning.weekly import WeekTotals


@dataclass(frozen=True)
class RunRow:
    """A run as the planning core sees it, with what charts need to label it."""

    id: int
    run_id: str
    variant: str
    started_at: datetime
    facts: RunFacts


def wall_clock(dialect: str) -> ColumnElement[Any]:
    """T in hours, computed by the database."""
    if dialect == "postgresql":
        # date_part returns float8; EXTRACT returns numeric since PostgreSQL 14, and the
        # weekly query uses this expression ~30 times (36.8 -> 19.4 ms on 1M runs).
        return func.date_part("epoch", Run.finished_at - Run.started_at) / 3600.0
    return (func.julianday(Run.finished_at) - func.julianday(Run.started_at)) * 24.0


def week_start(dialect: str) -> ColumnElement[Any]:
    """Monday of the run's ISO week (UTC)."""
    if dialect == "postgresql":
        return func.date_trunc("week", func.timezone("UTC", Run.started_at))
    return func.date(Run.started_at, "weekday 0", "-6 days")


def _greatest(a: ColumnElement[float], b: ColumnElement[float] | float) -> ColumnElement[float]:
    return case((a > b, a), else_=b)


def _dialect(session: Session) -> str:
    return session.get_bind().dialect.name


def effective_price() -> ColumnElement[float]:
    """The price projections use: the run's own, else the pipeline's *current* price, so
    a price change re-prices what the runs would cost from now on."""
    return func.coalesce(Run.price_per_gpu_hour, Pipeline.price_per_gpu_hour)


def recorded_price() -> ColumnElement[float]:
    """The price frozen on the run when it was stored (DOMAIN.md §2): recorded spend."""
    return Run.billed_price_per_gpu_hour.expression


@per_session
def recent_runs(
    session: Session,
    pipeline_id: int,
    *,
    variant: str | None = None,
    limit: int = 12,
    chronological: bool = True,
) -> list[RunRow]:
    """The newest ``limit`` runs (of a variant), as planning inputs."""
    hours = wall_clock(_dialect(session)).label("hours")
    stmt = (
        select(
            Run.id, Run.run_id, Run.variant, Run.started_at, Run.workers, hours, Run.gpu_hours,
            Run.gpu_utilization, effective_price().label("price"), Run.data_stall_hours,
            Run.checkpoint_hours, Run.scheduling_wait_hours, Run.mfu, Run.quality_value,
            Run.interruption_count, Run.lost_progress_hours, Run.resume_hours,
            Run.reschedule_hours,
        )
        .join(Pipeline, Pipeline.id == Run.pipeline_id)
        .where(Run.pipeline_id == pipeline_id)
        .order_by(Run.started_at.desc(), Run.id.desc())
        .limit(limit)
    )  # fmt: skip
    if variant is not None:
        stmt = stmt.where(Run.variant == variant)
    rows = [_to_run_row(r) for r in session.execute(stmt)]
    return rows[::-1] if chronological else rows


def _to_run_row(r: Any) -> RunRow:
    started = r.started_at if r.started_at.tzinfo else r.started_at.replace(tzinfo=UTC)
    hours = float(r.hours)
    interruptions = (
        (Interruption(r.lost_progress_hours, r.resume_hours, r.reschedule_hours),)
        if r.interruption_count
        else ()
    )
    # Stored durations were checked against the stored wall clock; julianday's
    # millisecond rounding must not make a valid run look impossible.
    explained = (
        r.data_stall_hours
        + r.checkpoint_hours
        + sum((r.lost_progress_hours, r.resume_hours, r.reschedule_hours))
    )
    hours = max(hours, explained, 1e-9)
    return RunRow(
        id=r.id,
        run_id=r.run_id,
        variant=r.variant,
        started_at=started,
        facts=RunFacts(
            workers=r.workers,
            wall_clock_hours=hours,
            gpu_hours=min(float(r.gpu_hours), r.workers * hours * 1.01),
            gpu_utilization=r.gpu_utilization,
            price_per_gpu_hour=float(r.price),
            data_stall_hours=r.data_stall_hours,
            checkpoint_hours=r.checkpoint_hours,
            scheduling_wait_hours=r.scheduling_wait_hours,
            mfu=r.mfu,
            interruptions=interruptions,
            quality_value=r.quality_value,
        ),
    )


def weekly_totals(
    session: Session, pipeline_id: int | None, since: datetime, until: datetime
) -> dict[int | None, list[WeekTotals]]:
    """Goodput sums and badput by cause (GPU-hours and USD) per pipeline and ISO week.

    The per-run terms are those documented on :class:`GoodputTotals` and in
    :func:`app.planning.economics.badput` (named causes scaled down to the idle time when
    they over-explain it, other idle never negative).
    """
    dialect = _dialect(session)
    t = wall_clock(dialect)
    weff = Run.gpu_hours / t
    price = recorded_price()
    progress = _greatest(
        weff * (t - Run.reschedule_hours - Run.resume_hours - Run.lost_progress_hours
                - Run.checkpoint_hours), 0.0,
    )  # fmt: skip
    busy = _greatest(Run.gpu_utilization * Run.gpu_hours - weff * Run.lost_progress_hours, 0.0)
    program = case(
        (Run.mfu.is_not(None), Run.mfu * progress), (busy > progress, progress), else_=busy
    )
    idle = (1.0 - Run.gpu_utilization) * Run.gpu_hours
    failure_hours = Run.lost_progress_hours + Run.resume_hours + Run.reschedule_hours
    named = (Run.data_stall_hours + Run.checkpoint_hours + failure_hours) * weff
    scale = case((named > idle, idle / _greatest(named, 1e-12)), else_=1.0)
    causes: dict[str, ColumnElement[float]] = {
        "productive": Run.gpu_utilization * Run.gpu_hours,
        "idle": idle,
        "data_stall": Run.data_stall_hours * weff * scale,
        "checkpoint": Run.checkpoint_hours * weff * scale,
        "failure": failure_hours * weff * scale,
        "other_idle": _greatest(idle - named, 0.0),
    }
    week = week_start(dialect).label("week")
    columns = [
        Run.pipeline_id,
        week,
        func.count().label("runs"),
        func.sum(Run.gpu_hours).label("gpu_hours"),
        func.sum(weff * (Run.scheduling_wait_hours + t)).label("period"),
        func.sum(weff * (Run.scheduling_wait_hours + Run.reschedule_hours)).label("unavailable"),
        func.sum(weff * (t - Run.reschedule_hours)).label("held"),
        func.sum(weff * (Run.resume_hours + Run.lost_progress_hours + Run.checkpoint_hours))
        .label("runtime_loss"),
        func.sum(cast(program, Float)).label("program"),
        func.sum(case((Run.mfu.is_not(None), Run.gpu_hours), else_=0.0)).label("mfu_hours"),
        func.sum(Run.gpu_hours * price).label("cost"),
        *[func.sum(cast(expr, Float)).label(f"g_{name}") for name, expr in causes.items()],
        *[func.sum(cast(expr * price, Float)).label(f"u_{name}") for name, expr in causes.items()],
    ]  # fmt: skip
    stmt = (
        select(*columns)
        .join(Pipeline, Pipeline.id == Run.pipeline_id)
        .where(Run.started_at >= since, Run.started_at < until)
        .group_by(Run.pipeline_id, week)
        .order_by(Run.pipeline_id, week)
    )
    if pipeline_id is not None:
        stmt = stmt.where(Run.pipeline_id == pipeline_id)
    out: dict[int | None, list[WeekTotals]] = {}
    for r in session.execute(stmt):
        m = r._mapping
        totals = GoodputTotals(
            runs=int(m["runs"]), gpu_hours=float(m["gpu_hours"]), period_gpu_hours=m["period"],
            unavailable_gpu_hours=m["unavailable"], held_gpu_hours=m["held"],
            runtime_loss_gpu_hours=m["runtime_loss"], program_gpu_hours=m["program"],
            mfu_gpu_hours=float(m["mfu_hours"]),
        )  # fmt: skip
        out.setdefault(r.pipeline_id, []).append(
            WeekTotals(
                week_start=_as_date(m["week"]),
                goodput=totals,
                cost_usd=float(m["cost"]),
                gpu_hours_by_cause={c: float(m[f"g_{c}"]) for c in causes},
                usd_by_cause={c: float(m[f"u_{c}"]) for c in causes},
            )
        )
    return out


def _as_date(value: Any) -> date:
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    return date.fromisoformat(str(value)[:10])


@per_session
def run_span(session: Session, pipeline_id: int) -> tuple[datetime, datetime] | None:
    first, last = session.execute(
        select(func.min(Run.started_at), func.max(Run.started_at)).where(
            Run.pipeline_id == pipeline_id
        )
    ).one()
    if first is None:
        return None
    return _aware(first), _aware(last)


def _aware(value: Any) -> datetime:
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    aware: datetime = value if value.tzinfo else value.replace(tzinfo=UTC)
    return aware


@dataclass(frozen=True)
class VariantStats:
    variant: str
    runs: int
    worker_counts: int
    last_started_at: datetime


@per_session
def variants(session: Session, pipeline_id: int) -> list[VariantStats]:
    rows = session.execute(
        select(Run.variant, func.count(), func.count(distinct(Run.workers)),
               func.max(Run.started_at))
        .where(Run.pipeline_id == pipeline_id)
        .group_by(Run.variant)
        .order_by(func.count().desc(), Run.variant)
    )  # fmt: skip
    return [VariantStats(v, int(n), int(w), _aware(last)) for v, n, w, last in rows]


@dataclass(frozen=True)
class FailureExposure:
    interruptions: int
    instance_hours: float
    mean_lost_progress_hours: float | None
    mean_restart_hours: float | None


@per_session
def failure_exposure(session: Session, pipeline_id: int) -> FailureExposure:
    """Interruptions against instance-hours (each worker counted as one instance)."""
    count, exposure, lost, restart = session.execute(
        select(
            func.coalesce(func.sum(Run.interruption_count), 0),
            func.coalesce(func.sum(Run.gpu_hours), 0.0),
            func.sum(Run.lost_progress_hours),
            func.sum(Run.resume_hours + Run.reschedule_hours),
        ).where(Run.pipeline_id == pipeline_id)
    ).one()
    n = int(count)
    return FailureExposure(
        interruptions=n,
        instance_hours=float(exposure),
        mean_lost_progress_hours=float(lost) / n if n else None,
        mean_restart_hours=float(restart) / n if n else None,
    )


@per_session
def worker_times(
    session: Session, pipeline_id: int, variant: str, limit: int = 500
) -> list[tuple[int, float]]:
    """(workers, wall clock hours) of a variant's newest runs, for the scaling fit."""
    hours = wall_clock(_dialect(session))
    stmt = (
        select(Run.workers, hours)
        .where(Run.pipeline_id == pipeline_id, Run.variant == variant)
        .order_by(Run.started_at.desc())
        .limit(limit)
    )
    return [(int(w), float(t)) for w, t in session.execute(stmt)]


def recorded_spend(
    session: Session, pipeline_ids: list[int], since: datetime, until: datetime
) -> dict[int, float]:
    """USD recorded per pipeline for runs started in [since, until), every variant, at
    the price frozen on each run."""
    if not pipeline_ids:
        return {}
    rows = session.execute(
        select(Run.pipeline_id, func.sum(Run.gpu_hours * recorded_price()))
        .where(Run.pipeline_id.in_(pipeline_ids), Run.started_at >= since, Run.started_at < until)
        .group_by(Run.pipeline_id)
    )
    return {pid: float(total or 0.0) for pid, total in rows}
