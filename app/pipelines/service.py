"""Reading and configuring pipelines."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.db.memo import per_session
from app.db.models import Pipeline, Run
from app.errors import NotFound
from app.pipelines.schemas import PipelineOut, PipelineUpdate
from app.settings import Settings


@per_session
def get_by_name(session: Session, name: str) -> Pipeline:
    row = session.scalar(select(Pipeline).where(Pipeline.name == name))
    if row is None:
        raise NotFound(
            f"no pipeline named {name!r}; pipelines are created by their first run "
            "(POST /api/v1/runs) or by PUT /api/v1/pipelines/{name}"
        )
    return row


def _stats(session: Session, ids: list[int]) -> dict[int, tuple[int, datetime | None]]:
    rows = session.execute(
        select(Run.pipeline_id, func.count(), func.max(Run.started_at))
        .where(Run.pipeline_id.in_(ids))
        .group_by(Run.pipeline_id)
    )
    return {pid: (count, last) for pid, count, last in rows}


def to_out(row: Pipeline, stats: tuple[int, datetime | None] = (0, None)) -> PipelineOut:
    out = PipelineOut.model_validate(row)
    out.run_count, last = stats
    if last is not None and last.tzinfo is None:  # SQLite aggregates lose the column type
        from datetime import UTC

        last = datetime.fromisoformat(str(last)).replace(tzinfo=UTC)
    out.last_run_at = last
    return out


def list_all(session: Session, only: Sequence[str] | None = None) -> list[PipelineOut]:
    """Every pipeline, or those named in ``only`` (a token's pipeline limit)."""
    stmt = select(Pipeline).order_by(Pipeline.name)
    if only is not None:
        stmt = stmt.where(Pipeline.name.in_(only))
    rows = list(session.scalars(stmt))
    stats = _stats(session, [r.id for r in rows])
    return [to_out(r, stats.get(r.id, (0, None))) for r in rows]


def describe(session: Session, name: str) -> PipelineOut:
    row = get_by_name(session, name)
    return to_out(row, _stats(session, [row.id]).get(row.id, (0, None)))


def upsert(session: Session, name: str, update: PipelineUpdate, settings: Settings) -> Pipeline:
    row = session.scalar(select(Pipeline).where(Pipeline.name == name))
    if row is None:
        row = Pipeline(
            name=name,
            display_name=name,
            owner="",
            price_per_gpu_hour=settings.default_price_per_gpu_hour,
            runs_per_week=1.0,
            quality_metric="quality",
            higher_is_better=True,
        )
        session.add(row)
    for field, value in update.model_dump(exclude_unset=True).items():
        if value is None and field != "monthly_budget_usd":
            continue
        setattr(row, field, value)
    session.flush()
    return row
