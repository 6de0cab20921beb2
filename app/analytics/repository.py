"""Analytical queries: aggregation happens in SQL, rows come back small.

Every query reads the ``run`` table's columns (interruption sums are kept on the run),
so weekly goodput and badput are one GROUP BY and a projection reads a bounded number
of recent runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    ARRAY,
    Float,
    Integer,
    Text,
    bindparam,
    cast,
    distinct,
    func,
    select,
    true,
)
from sqlalchemy.dialects.postgresql import aggregate_order_by
from sqlalchemy.orm import Session, aliased

from app.db.memo import per_session
from app.db.models import Pipeline, Run, RunVariant
from app.db.run_terms import as_date, goodput_totals, run_terms, wall_clock, week_start
from app.db.sql import dialect, effective_price, in_ids, recorded_price
from app.planning.model import Interruption, RunFacts
from app.planning.rollup import GOODPUT_SUMS
from app.planning.weekly import WeekTotals


@dataclass(frozen=True)
class RunRow:
    """A run as the planning core sees it, with what charts need to label it."""

    id: int
    run_id: str
    variant: str
    started_at: datetime
    facts: RunFacts
    utilization_source: str | None = None


# The runs a planning window holds: succeeded attempts with a utilization figure (the
# per-run model needs it). Failed attempts and unmeasured ones count in recorded spend
# and badput (the rollups), not here.
PLANNING_ATTEMPTS = (Run.outcome == "succeeded", Run.gpu_utilization.is_not(None))


@per_session
def recent_runs(
    session: Session,
    pipeline_id: int,
    *,
    variant: str | None = None,
    limit: int = 12,
    chronological: bool = True,
) -> list[RunRow]:
    """The newest ``limit`` runs (of a variant), as planning inputs, each with the
    GPU-hours and cost of its retraining's attempts that did not succeed."""
    hours = wall_clock(dialect(session)).label("hours")
    failed_gpu, failed_usd = _failed_attempts()
    stmt = (
        select(
            Run.id,
            Run.run_id,
            Run.variant,
            Run.started_at,
            Run.workers,
            hours,
            Run.gpu_hours,
            Run.gpu_utilization,
            effective_price().label("price"),
            Run.data_stall_hours,
            Run.checkpoint_hours,
            Run.scheduling_wait_hours,
            Run.mfu,
            Run.quality_value,
            Run.interruption_count,
            Run.lost_progress_hours,
            Run.resume_hours,
            Run.reschedule_hours,
            Run.utilization_source,
            failed_gpu.label("failed_gpu_hours"),
            failed_usd.label("failed_usd"),
        )
        .join(Pipeline, Pipeline.id == Run.pipeline_id)
        .where(Run.pipeline_id == pipeline_id, *PLANNING_ATTEMPTS)
        .order_by(Run.started_at.desc(), Run.id.desc())
        .limit(limit)
    )
    if variant is not None:
        stmt = stmt.where(Run.variant == variant)
    rows = [_to_run_row(r) for r in session.execute(stmt)]
    return rows[::-1] if chronological else rows


def _failed_attempts() -> tuple[Any, Any]:
    """Correlated sums over the other attempts of the outer run's retraining that did not
    succeed (``ix_run_pipeline_retraining``): their GPU-hours, and their cost at the
    projection price (the attempt's own, else the pipeline's current one)."""
    other = aliased(Run)
    same = (
        other.pipeline_id == Run.pipeline_id,
        other.retraining_id == Run.retraining_id,
        other.outcome != "succeeded",
    )
    price = func.coalesce(other.price_per_gpu_hour, Pipeline.price_per_gpu_hour)
    gpu = select(func.coalesce(func.sum(other.gpu_hours), 0.0)).where(*same)
    usd = select(func.coalesce(func.sum(other.gpu_hours * price), 0.0)).where(*same)
    return gpu.scalar_subquery(), usd.scalar_subquery()


def recent_costs(
    session: Session, variants: dict[int, str], limit: int = 12
) -> dict[int, tuple[float, ...]]:
    """The retraining costs of each (pipeline id: variant)'s ``limit`` newest runs, oldest
    first: each run's cost as :func:`_to_run_row` has it (GPU-hours capped at workers x
    hours x 1.01, hours at least the explained time) times the effective price, plus its
    retraining's failed attempts (:func:`_failed_attempts`): the window the bill draws
    from and whose mean the expected bill multiplies.

    PostgreSQL: one statement, a LATERAL index scan of ``ix_run_pipeline_variant_started``
    per pair (5,000 pairs x 12 runs, not the whole table) and ``array_agg``. SQLite: one
    query per pair.
    """
    if not variants:
        return {}
    if dialect(session) != "postgresql":
        out = {}
        for pid, v in variants.items():
            rows = recent_runs(session, pid, variant=v, limit=limit)
            if rows:
                out[pid] = tuple(r.facts.retraining_cost_usd for r in rows)
        return out
    ids, names = list(variants), [variants[i] for i in variants]
    pairs = (
        func.unnest(
            bindparam("ids", ids, type_=ARRAY(Integer)),
            bindparam("names", names, type_=ARRAY(Text)),
        )
        .table_valued("pid", "variant")
        .render_derived(name="pairs")
    )
    explained = (
        Run.data_stall_hours
        + Run.checkpoint_hours
        + Run.lost_progress_hours
        + Run.resume_hours
        + Run.reschedule_hours
    )
    hours = func.greatest(wall_clock("postgresql"), explained, 1e-9)
    cost = func.least(Run.gpu_hours, Run.workers * hours * 1.01) * effective_price()
    _, failed_usd = _failed_attempts()
    recent = (
        select((cost + failed_usd).label("cost"), Run.started_at, Run.id.label("pk"))
        .join(Pipeline, Pipeline.id == Run.pipeline_id)
        .where(Run.pipeline_id == pairs.c.pid, Run.variant == pairs.c.variant, *PLANNING_ATTEMPTS)
        .order_by(Run.started_at.desc(), Run.id.desc())
        .limit(limit)
        .lateral()
    )
    window = func.array_agg(aggregate_order_by(recent.c.cost, recent.c.started_at, recent.c.pk))
    stmt = select(pairs.c.pid, window).select_from(pairs).join(recent, true()).group_by(pairs.c.pid)
    return {pid: tuple(float(c) for c in w) for pid, w in session.execute(stmt)}


def production_changes(
    session: Session, pipeline_ids: list[int] | None
) -> dict[int, tuple[str, int]]:
    """(production variant, its change counter) of these pipelines (every one: None) whose
    production variant has runs, by pipeline id: one join of ``run_variant``."""
    v = RunVariant
    stmt = (
        select(v.pipeline_id, v.variant, v.changes)
        .join(Pipeline, (Pipeline.id == v.pipeline_id) & (Pipeline.production_variant == v.variant))
        .where(v.runs > 0)
    )
    if pipeline_ids is not None:
        stmt = stmt.where(in_ids(session, v.pipeline_id, pipeline_ids))
    return {pid: (variant, changes) for pid, variant, changes in session.execute(stmt)}


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
            failed_attempts_gpu_hours=float(r.failed_gpu_hours),
            failed_attempts_cost_usd=float(r.failed_usd),
        ),
        utilization_source=r.utilization_source,
    )


def weekly_totals(
    session: Session, pipeline_id: int | None, since: datetime, until: datetime
) -> dict[int | None, list[WeekTotals]]:
    """Goodput sums and badput by cause (GPU-hours and USD) per pipeline and ISO week.

    The per-run terms are those documented on :class:`GoodputTotals` and in
    :func:`app.planning.economics.badput` (named causes scaled down to the idle time when
    they over-explain it, other idle never negative).
    """
    backend = dialect(session)
    price = recorded_price()
    terms, causes = run_terms(backend)
    week = week_start(backend).label("week")
    columns = [
        Run.pipeline_id,
        week,
        func.count().label("runs"),
        *[func.sum(terms[name]).label(name) for name in GOODPUT_SUMS],
        func.sum(Run.gpu_hours * price).label("cost"),
        *[func.sum(cast(expr, Float)).label(f"g_{name}") for name, expr in causes.items()],
        *[func.sum(cast(expr * price, Float)).label(f"u_{name}") for name, expr in causes.items()],
    ]
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
        totals = goodput_totals(m)
        out.setdefault(r.pipeline_id, []).append(
            WeekTotals(
                week_start=as_date(m["week"]),
                goodput=totals,
                cost_usd=float(m["cost"]),
                gpu_hours_by_cause={c: float(m[f"g_{c}"]) for c in causes},
                usd_by_cause={c: float(m[f"u_{c}"]) for c in causes},
            )
        )
    return out


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
        select(
            Run.variant, func.count(), func.count(distinct(Run.workers)), func.max(Run.started_at)
        )
        .where(Run.pipeline_id == pipeline_id)
        .group_by(Run.variant)
        .order_by(func.count().desc(), Run.variant)
    )
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
    hours = wall_clock(dialect(session))
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


def utilization_sources(
    session: Session, pipeline_id: int, since: datetime, until: datetime
) -> dict[str | None, int]:
    """Runs per ``utilization_source`` started in ``[since, until)`` (None: not given)."""
    rows = session.execute(
        select(Run.utilization_source, func.count())
        .where(Run.pipeline_id == pipeline_id, Run.started_at >= since, Run.started_at < until)
        .group_by(Run.utilization_source)
    )
    return {source: int(n) for source, n in rows}
