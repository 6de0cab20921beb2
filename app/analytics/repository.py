"""Analytical queries: aggregation happens in SQL, rows come back small.

Every query reads the ``run`` table's columns (interruption sums are kept on the run),
so weekly goodput and badput are one GROUP BY and a projection reads a bounded number
of recent runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    Float,
    cast,
    distinct,
    func,
    literal,
    select,
    union_all,
)
from sqlalchemy.orm import Session

from app.db.cost_reads import (
    PLANNING_ATTEMPTS,
    abandoned_rows,
    failed_attempts,
    latest_change,
)
from app.db.cost_reads import recent_costs as recent_costs
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


def _capped(r: Any) -> tuple[float, float]:
    """A row's wall clock (at least its explained time) and GPU-hours (at most workers x
    hours x 1.01). Stored durations were checked against the stored wall clock;
    julianday's millisecond rounding must not make a valid run look impossible."""
    explained = (
        r.data_stall_hours
        + r.checkpoint_hours
        + sum((r.lost_progress_hours, r.resume_hours, r.reschedule_hours))
    )
    hours = max(float(r.hours), explained, 1e-9)
    return hours, min(float(r.gpu_hours), r.workers * hours * 1.01)


def _to_run_row(r: Any) -> RunRow:
    started = r.started_at if r.started_at.tzinfo else r.started_at.replace(tzinfo=UTC)
    interruptions = (
        (Interruption(r.lost_progress_hours, r.resume_hours, r.reschedule_hours),)
        if r.interruption_count
        else ()
    )
    hours, gpu_hours = _capped(r)
    return RunRow(
        id=r.id,
        run_id=r.run_id,
        variant=r.variant,
        started_at=started,
        facts=RunFacts(
            workers=r.workers,
            wall_clock_hours=hours,
            gpu_hours=gpu_hours,
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
            resumed_from_hours=float(r.resumed_from_hours),
        ),
        utilization_source=r.utilization_source,
    )


def weekly_totals(
    session: Session, pipeline_id: int | None, since: datetime, until: datetime, variant: str = ""
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
    if variant:  # one variant's runs (default: every variant's)
        stmt = stmt.where(Run.variant == variant)
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
def variants(session: Session, pipeline_id: int) -> tuple[list[VariantStats], int, datetime | None]:
    """Every variant of the pipeline, most-run first (one GROUP BY over its runs), and in
    the same statement its change count (``rollup_reads.change_counts``; 0: no runs) and its
    latest declared change (``cost_reads.latest_change``; None: none)."""
    change_count = select(func.coalesce(func.sum(RunVariant.changes), 0))
    rows = session.execute(
        select(
            change_count.where(RunVariant.pipeline_id == pipeline_id).scalar_subquery(),
            latest_change(pipeline_id),
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
        for _, _, v, n, w, last, i, h, lost, rest in rows
    ]
    if not rows:
        return stats, 0, None
    return stats, int(rows[0][0]), _aware(rows[0][1]) if rows[0][1] is not None else None


@dataclass(frozen=True)
class Windows:
    """The newest planning runs of some variants, of any variant, and the (workers, wall
    clock hours) of one variant's newest runs of every outcome (the scaling fit)."""

    by_variant: dict[str, list[RunRow]]
    recent: list[RunRow]
    worker_times: list[tuple[int, float]]
    # Each variant's newest retrainings abandoned after failed attempts, as (cost, extra
    # attempts' cost, start): they count in the cost series, not in the per-run model.
    abandoned: dict[str, list[tuple[float, float, datetime]]] = field(default_factory=dict)


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
    failed_gpu, failed_usd = failed_attempts()
    columns = [*_planning_columns(backend), failed_gpu.label("failed_gpu_hours")]
    priced = [*columns, failed_usd.label("failed_usd")]
    members = [_member(pipeline_id, f"v:{v}", priced, limit, variant=v) for v in variants]
    given_up = abandoned_rows()
    members += [
        _member(pipeline_id, f"a:{v}", priced, limit, variant=v, where=given_up) for v in variants
    ]
    if recent:
        members.append(_member(pipeline_id, "recent", priced, recent))
    if scaling is not None:
        # Every outcome counts for wall clock by worker count; the costs are not read.
        zero = literal(0.0, Float)
        cheap = [*_planning_columns(backend), zero.label("failed_gpu"), zero.label("failed_usd")]
        members.append(
            _member(pipeline_id, "s", cheap, SCALING_RUNS, variant=scaling, planning=False)
        )
    out = Windows({name: [] for name in variants}, [], [], {name: [] for name in variants})
    if not members:
        return out
    rows = sorted(session.execute(union_all(*members)), key=lambda r: (r.started_at, r.id))
    for r in rows:
        if r.member == "s":
            out.worker_times.append((int(r.workers), float(r.raw_hours)))
        elif r.member == "recent":
            out.recent.append(_to_run_row(r))
        elif r.member.startswith("a:"):
            cost = _capped(r)[1] * float(r.price) + float(r.failed_usd)
            out.abandoned[r.member[2:]].append((cost, float(r.failed_usd), _aware(r.started_at)))
        else:
            out.by_variant[r.member[2:]].append(_to_run_row(r))
    out.worker_times.reverse()  # newest first, as the fit has always read them
    return out


def _planning_columns(backend: str) -> list[Any]:
    hours = wall_clock(backend)
    return [
        Run.id,
        Run.run_id,
        Run.variant,
        Run.started_at,
        Run.workers,
        hours.label("hours"),
        hours.label("raw_hours"),
        Run.gpu_hours,
        Run.gpu_utilization,
        Run.resumed_from_hours,
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
    ]


def _member(
    pipeline_id: int,
    label: str,
    columns: list[Any],
    limit: int,
    *,
    variant: str | None = None,
    planning: bool = True,
    where: Any = None,
) -> Any:
    stmt = (
        select(literal(label).label("member"), *columns)
        .join(Pipeline, Pipeline.id == Run.pipeline_id)
        # A running attempt has no wall clock yet: no window holds it until it finishes.
        .where(Run.pipeline_id == pipeline_id, Run.finished_at.is_not(None))
        .order_by(Run.started_at.desc(), Run.id.desc())
        .limit(limit)
    )
    if where is not None:
        stmt = stmt.where(where)
    elif planning:
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
    session: Session, pipeline_id: int, since: datetime, until: datetime, variant: str
) -> dict[str | None, int]:
    """Runs of ``variant`` per ``utilization_source`` started in ``[since, until)``."""
    rows = session.execute(
        select(Run.utilization_source, func.count())
        .where(Run.pipeline_id == pipeline_id, Run.variant == variant)
        .where(Run.started_at >= since, Run.started_at < until)
        .where(Run.finished_at.is_not(None))
        .group_by(Run.utilization_source)
    )
    return {source: int(n) for source, n in rows}
