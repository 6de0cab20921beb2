"""The cost series of many pipelines' variants in one statement (methodology.md §9).

A retraining is every attempt sharing its ``retraining_id``: its succeeded attempt plus
the attempts that failed, or, abandoned, all of them. ``app.analytics.costs`` keeps these
series between requests; the planning windows of ``app.analytics.repository`` share the
failed attempts' sums defined here.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    ARRAY,
    Integer,
    Text,
    and_,
    bindparam,
    func,
    literal,
    or_,
    select,
    true,
    union_all,
)
from sqlalchemy.dialects.postgresql import aggregate_order_by
from sqlalchemy.orm import Session, aliased

from app.db.models import ChangeNote, Pipeline, PipelineChange, Run
from app.db.run_terms import wall_clock
from app.db.sql import dialect, effective_price

# The runs a planning window holds: succeeded attempts with a utilization figure (the
# per-run model needs it). Failed attempts and unmeasured ones count in recorded spend
# and badput (the rollups), not here.
PLANNING_ATTEMPTS = (Run.outcome == "succeeded", Run.gpu_utilization.is_not(None))


def failed_attempts() -> tuple[Any, Any]:
    """Correlated sums over the other attempts of the outer run's retraining that did not
    succeed (``ix_run_pipeline_retraining``): their GPU-hours, and their cost at the
    projection price (the attempt's own, else the pipeline's current one)."""
    other = aliased(Run)
    same = (
        other.pipeline_id == Run.pipeline_id,
        other.retraining_id == Run.retraining_id,
        other.outcome != "succeeded",
        other.id != Run.id,  # an abandoned retraining's newest attempt is its own row
    )
    price = func.coalesce(other.price_per_gpu_hour, Pipeline.price_per_gpu_hour)
    gpu = select(func.coalesce(func.sum(other.gpu_hours), 0.0)).where(*same)
    usd = select(func.coalesce(func.sum(other.gpu_hours * price), 0.0)).where(*same)
    return gpu.scalar_subquery(), usd.scalar_subquery()


Series = tuple[tuple[float, float, datetime], ...]  # (cost, extra attempts' cost, start)

# Attempts that end a retraining that never succeeded: kept in the cost series at what
# all its attempts cost (methodology.md §9: every retraining counts).
GAVE_UP = ("failed", "preempted", "cancelled")


def abandoned_rows() -> Any:
    """The newest attempt of each retraining none of whose attempts succeeded: it stands
    for that retraining in the cost series, its other attempts as its extra cost."""
    other = aliased(Run)
    superseded = (
        select(literal(1))
        .where(
            other.pipeline_id == Run.pipeline_id,
            other.retraining_id == Run.retraining_id,
            or_(
                other.outcome == "succeeded",
                other.started_at > Run.started_at,
                and_(other.started_at == Run.started_at, other.id > Run.id),
            ),
        )
        .exists()
    )
    return and_(Run.outcome.in_(GAVE_UP), ~superseded)


def _series_rows() -> Any:
    """Which attempts stand for a retraining in the cost series: a succeeded planning
    attempt, or an abandoned retraining's newest attempt."""
    return or_(and_(*PLANNING_ATTEMPTS), abandoned_rows())


def _series_select(backend: str, pid: Any, variant: Any, limit: int) -> Any:
    explained = (
        Run.data_stall_hours
        + Run.checkpoint_hours
        + Run.lost_progress_hours
        + Run.resume_hours
        + Run.reschedule_hours
    )
    big, small = (func.greatest, func.least) if backend == "postgresql" else (func.max, func.min)
    hours = big(wall_clock(backend), explained, 1e-9)
    cost = small(Run.gpu_hours, Run.workers * hours * 1.01) * effective_price()
    _, failed_usd = failed_attempts()
    return (
        select(
            (cost + failed_usd).label("cost"),
            failed_usd.label("extra"),
            Run.started_at,
            Run.id.label("pk"),
        )
        .join(Pipeline, Pipeline.id == Run.pipeline_id)
        .where(Run.pipeline_id == pid, Run.variant == variant, _series_rows())
        .order_by(Run.started_at.desc(), Run.id.desc())
        .limit(limit)
    )


def recent_costs(session: Session, variants: dict[int, str], limit: int = 12) -> dict[int, Series]:
    """The cost series of each (pipeline id: variant): its ``limit`` newest retrainings,
    oldest first, as (cost, extra, start). A retraining is its succeeded planning attempt
    (its cost as the planning windows have it: GPU-hours capped at workers x hours x
    1.01, hours at least the explained time, times the effective price) plus its failed
    attempts (``extra``), or, abandoned, its newest attempt plus the others: the window
    the bill draws from.

    PostgreSQL: one statement, a LATERAL index scan of ``ix_run_pipeline_variant_started``
    per pair (5,000 pairs x 12 runs, not the whole table) and ``array_agg``. SQLite: one
    query per pair.
    """
    if not variants:
        return {}
    backend = dialect(session)
    if backend != "postgresql":
        out = {}
        for pid, v in variants.items():
            rows = session.execute(_series_select(backend, pid, v, limit)).all()
            if rows:
                out[pid] = tuple((float(c), float(e), _aware(t)) for c, e, t, _ in rows[::-1])
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
    recent = _series_select(backend, pairs.c.pid, pairs.c.variant, limit).lateral()
    order = (recent.c.started_at, recent.c.pk)
    agg = [func.array_agg(aggregate_order_by(col, *order)) for col in recent.c[:3]]
    stmt = select(pairs.c.pid, *agg).select_from(pairs).join(recent, true()).group_by(pairs.c.pid)
    return {
        pid: tuple((float(c), float(e), _aware(t)) for c, e, t in zip(cs, es, ts, strict=True))
        for pid, cs, es, ts in session.execute(stmt)
    }


def _aware(value: Any) -> datetime:
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    aware: datetime = value if value.tzinfo else value.replace(tzinfo=UTC)
    return aware


def declared_changes(
    session: Session, pipeline_ids: list[int] | None
) -> dict[int, list[tuple[datetime, str]]]:
    """Each pipeline's change points, oldest first, as (at, description): its declared
    notes and the changes of its price setting (not its first setting), what
    ``app.pipelines.service.change_points`` lists for one pipeline, for many in one
    statement."""
    notes = select(ChangeNote.pipeline_id, ChangeNote.at, ChangeNote.description)
    prices = select(
        PipelineChange.pipeline_id, PipelineChange.created_at, literal("price change")
    ).where(PipelineChange.field == "price_per_gpu_hour", PipelineChange.old_value.is_not(None))
    if pipeline_ids is not None:
        notes = notes.where(ChangeNote.pipeline_id.in_(pipeline_ids))
        prices = prices.where(PipelineChange.pipeline_id.in_(pipeline_ids))
    out: dict[int, list[tuple[datetime, str]]] = {}
    for pid, at, text in session.execute(union_all(notes, prices)):
        out.setdefault(pid, []).append((_aware(at), str(text)))
    return {pid: sorted(found) for pid, found in out.items()}


def latest_change(pipeline_id: Any) -> Any:
    """The pipeline's latest change point (a declared note or a price change), as a
    scalar subquery (None: none): the page reads it in its variants statement."""
    notes = select(ChangeNote.at.label("at")).where(ChangeNote.pipeline_id == pipeline_id)
    prices = select(PipelineChange.created_at.label("at")).where(
        PipelineChange.pipeline_id == pipeline_id,
        PipelineChange.field == "price_per_gpu_hour",
        PipelineChange.old_value.is_not(None),
    )
    both = union_all(notes, prices).subquery()
    return select(func.max(both.c.at)).scalar_subquery()
