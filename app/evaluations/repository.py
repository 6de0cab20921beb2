"""Evaluation queries."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, cast

from sqlalchemy import and_, func, or_, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session

from app.db.engine import WriteSession
from app.db.models import Evaluation, Pipeline, Run

MAX_FIT_POINTS = 5000
Key = tuple[int, datetime, str]  # (run_pk, evaluated_at in UTC, metric)


def runs_by_run_id(
    session: Session, pipeline_id: int, run_ids: Sequence[str]
) -> dict[str, tuple[int, datetime]]:
    """run_id -> (pk, finished_at) for the given run ids of one pipeline; a running
    attempt is not a model yet, so it is not among them."""
    rows = session.execute(
        select(Run.run_id, Run.id, Run.finished_at).where(
            Run.pipeline_id == pipeline_id,
            Run.run_id.in_(sorted(set(run_ids))),
            Run.finished_at.is_not(None),
        )
    )
    return {r.run_id: (r.id, cast(datetime, r.finished_at)) for r in rows}


def stored(session: Session, keys: Sequence[Key]) -> dict[Key, Evaluation]:
    if not keys:
        return {}
    rows = session.scalars(
        select(Evaluation).where(
            Evaluation.run_pk.in_(sorted({k[0] for k in keys})),
            Evaluation.metric.in_(sorted({k[2] for k in keys})),
        )
    )
    wanted = set(keys)
    found = {(r.run_pk, r.evaluated_at, r.metric): r for r in rows}
    return {k: v for k, v in found.items() if k in wanted}


def insert_new(session: WriteSession, values: list[dict[str, Any]]) -> None:
    """Insert, skipping keys a racing request stored first (they are compared afterwards)."""
    if not values:
        return
    dialect = session.get_bind().dialect.name
    make = postgresql.insert if dialect == "postgresql" else sqlite.insert
    stmt = make(Evaluation).on_conflict_do_nothing(
        index_elements=["run_pk", "evaluated_at", "metric"]
    )
    session.execute(stmt, values)


def page(
    session: Session,
    pipeline_id: int,
    *,
    run_id: str | None,
    after: tuple[datetime, int] | None,
    limit: int,
) -> list[tuple[Evaluation, str, datetime]]:
    """Newest first by (evaluated_at, id), with the model run's id and finish time."""
    query = (
        select(Evaluation, Run.run_id, Run.finished_at)
        .join(Run, Run.id == Evaluation.run_pk)
        .where(Evaluation.pipeline_id == pipeline_id)
        .order_by(Evaluation.evaluated_at.desc(), Evaluation.id.desc())
        .limit(limit)
    )
    if run_id is not None:
        query = query.where(Run.run_id == run_id)
    if after is not None:
        at, pk = after
        query = query.where(
            or_(
                Evaluation.evaluated_at < at,
                and_(Evaluation.evaluated_at == at, Evaluation.id < pk),
            )
        )
    # An evaluated model's run has finished (runs_by_run_id): finished_at is never None.
    return [(r[0], r[1], cast(datetime, r[2])) for r in session.execute(query)]


def ages_and_values(
    session: Session, pipeline_id: int, metric: str
) -> list[tuple[datetime, datetime, float]]:
    """(evaluated_at, model finished_at, value) of the latest evaluations of a metric."""
    rows = session.execute(
        select(Evaluation.evaluated_at, Run.finished_at, Evaluation.value)
        .join(Run, Run.id == Evaluation.run_pk)
        .where(Evaluation.pipeline_id == pipeline_id, Evaluation.metric == metric)
        .order_by(Evaluation.evaluated_at.desc())
        .limit(MAX_FIT_POINTS)
    )
    return [(r[0], cast(datetime, r[1]), r[2]) for r in rows]


def curve_stamps(
    session: Session, pipeline_ids: Sequence[int] | None
) -> dict[int, tuple[Any, ...]]:
    """Per pipeline with a quality value and evaluations of its metric: (evaluations,
    newest id, value, higher_is_better, metric, quality margin, gate power, cost basis):
    what its value curve and its gate's thresholds depend on (evaluations are only ever
    added, so the count and newest id move with them)."""
    settings = (
        Pipeline.quality_value_usd_per_unit_month,
        Pipeline.higher_is_better,
        Pipeline.quality_metric,
        Pipeline.quality_margin,
        Pipeline.gate_power,
        Pipeline.gate_cost_basis,
    )
    stmt = (
        select(Evaluation.pipeline_id, func.count(), func.max(Evaluation.id), *settings)
        .join(Pipeline, Pipeline.id == Evaluation.pipeline_id)
        .where(
            Pipeline.quality_value_usd_per_unit_month.is_not(None),
            Evaluation.metric == Pipeline.quality_metric,
        )
        .group_by(Evaluation.pipeline_id, *settings)
    )
    if pipeline_ids is not None:
        stmt = stmt.where(Evaluation.pipeline_id.in_(list(pipeline_ids)))
    return {r[0]: tuple(r[1:]) for r in session.execute(stmt)}
