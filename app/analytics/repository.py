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
    literal,
    select,
    true,
    union_all,
)
from sqlalchemy.dialects.postgresql import aggregate_order_by
from sqlalchemy.orm import Session, aliased

from app.db.memo import per_session
from app.db.models import Pipeline, Run, RunVariant
from app.db.run_terms import as_date, goodput_totals, run_terms, wall_clock, week_start
from app.db.sql import dialect, effective_price, recorded_price
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
    if variant is None:
        rows = windows(session, pipeline_id, [], limit=0, recent=limit, scaling=None).recent
    else:
        found = windows(session, pipeline_id, [variant], limit=limit, recent=0, scaling=None)
        rows = found.by_variant[variant]
    return rows if chronological else rows[::-1]


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
        .where(Run.started_at >= since, Run.started_at < until, Run.finished_at.is_not(None))
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


def _aware(value: Any) -> datetime:
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    aware: datetime = value if value.tzinfo else value.replace(tzinfo=UTC)
    return aware


@dataclass(frozen=True)
class VariantStats:
    """One variant's runs (every outcome): how many, at how many worker counts, the newest
    start, and its interruptions against instance-hours (each worker one instance)."""

    variant: str
    runs: int
    worker_counts: int
    last_started_at: datetime
    interruptions: int = 0
    instance_hours: float = 0.0
    lost_progress_hours: float = 0.0
    restart_hours: float = 0.0


@per_session
def variants(session: Session, pipeline_id: int) -> tuple[list[VariantStats], int]:
    """Every variant of the pipeline, most-run first (one GROUP BY over its runs), and in
    the same statement its signature (``rollup_reads.signatures``; 0: no runs)."""
    signature = select(func.coalesce(func.sum(RunVariant.changes), 0))
    rows = session.execute(
        select(
            signature.where(RunVariant.pipeline_id == pipeline_id).scalar_subquery(),
            Run.variant,
            func.count(),
            func.count(distinct(Run.workers)),
            func.max(Run.started_at),
            func.coalesce(func.sum(Run.interruption_count), 0),
            func.coalesce(func.sum(Run.gpu_hours), 0.0),
            func.coalesce(func.sum(Run.lost_progress_hours), 0.0),
            func.coalesce(func.sum(Run.resume_hours + Run.reschedule_hours), 0.0),
        )
        .where(Run.pipeline_id == pipeline_id)
        .group_by(Run.variant)
        .order_by(func.count().desc(), Run.variant)
    ).all()
    stats = [
        VariantStats(v, int(n), int(w), _aware(last), int(i), float(h), float(lost), float(rest))
        for _, v, n, w, last, i, h, lost, rest in rows
    ]
    return stats, int(rows[0][0]) if rows else 0


@dataclass(frozen=True)
class Windows:
    """The newest planning runs of some variants, of any variant, and the (workers, wall
    clock hours) of one variant's newest runs of every outcome (the scaling fit)."""

    by_variant: dict[str, list[RunRow]]
    recent: list[RunRow]
    worker_times: list[tuple[int, float]]


SCALING_RUNS = 500  # the newest runs of the scaling variant the fit reads


def windows(
    session: Session,
    pipeline_id: int,
    variants: list[str],
    *,
    limit: int,
    recent: int,
    scaling: str | None,
) -> Windows:
    """:func:`recent_runs` of each variant (``limit``) and of any variant (``recent``),
    plus the scaling variant's newest :data:`SCALING_RUNS` runs, in one statement: a
    UNION ALL of index scans, each member labelled. Oldest first in each window."""
    backend = dialect(session)
    failed_gpu, failed_usd = _failed_attempts()
    columns = [*_planning_columns(backend), failed_gpu.label("failed_gpu_hours")]
    priced = [*columns, failed_usd.label("failed_usd")]
    members = [_member(pipeline_id, f"v:{v}", priced, limit, variant=v) for v in variants]
    if recent:
        members.append(_member(pipeline_id, "recent", priced, recent))
    if scaling is not None:
        # Every outcome counts for wall clock by worker count; the costs are not read.
        zero = literal(0.0, Float)
        cheap = [*_planning_columns(backend), zero.label("failed_gpu"), zero.label("failed_usd")]
        members.append(
            _member(pipeline_id, "s", cheap, SCALING_RUNS, variant=scaling, planning=False)
        )
    out = Windows({name: [] for name in variants}, [], [])
    if not members:
        return out
    rows = sorted(session.execute(union_all(*members)), key=lambda r: (r.started_at, r.id))
    for r in rows:
        if r.member == "s":
            out.worker_times.append((int(r.workers), float(r.raw_hours)))
        elif r.member == "recent":
            out.recent.append(_to_run_row(r))
        else:
            out.by_variant[r.member[2:]].append(_to_run_row(r))
    out.worker_times.reverse()  # newest first, as the fit has always read them
    return out


def _planning_columns(backend: str) -> list[Any]:
    hours = wall_clock(backend)
    return [
        Run.id, Run.run_id, Run.variant, Run.started_at, Run.workers, hours.label("hours"),
        hours.label("raw_hours"), Run.gpu_hours, Run.gpu_utilization,
        effective_price().label("price"), Run.data_stall_hours, Run.checkpoint_hours,
        Run.scheduling_wait_hours, Run.mfu, Run.quality_value, Run.interruption_count,
        Run.lost_progress_hours, Run.resume_hours, Run.reschedule_hours, Run.utilization_source,
    ]  # fmt: skip


def _member(
    pipeline_id: int,
    label: str,
    columns: list[Any],
    limit: int,
    *,
    variant: str | None = None,
    planning: bool = True,
) -> Any:
    stmt = (
        select(literal(label).label("member"), *columns)
        .join(Pipeline, Pipeline.id == Run.pipeline_id)
        # A running attempt has no wall clock yet: no window holds it until it finishes.
        .where(Run.pipeline_id == pipeline_id, Run.finished_at.is_not(None))
        .order_by(Run.started_at.desc(), Run.id.desc())
        .limit(limit)
    )
    if planning:
        stmt = stmt.where(*PLANNING_ATTEMPTS)
    if variant is not None:
        stmt = stmt.where(Run.variant == variant)
    return select(stmt.subquery())


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
        .where(Run.finished_at.is_not(None))
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
        .where(Run.finished_at.is_not(None))
        .group_by(Run.utilization_source)
    )
    return {source: int(n) for source, n in rows}
