"""Reading and configuring pipelines."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy.orm import Session

from app.db.engine import WriteSession
from app.db.memo import per_session
from app.db.models import Pipeline
from app.exceptions import NotFound
from app.pipelines import repository
from app.pipelines.schemas import PipelineOut, PipelineUpdate
from app.settings import Settings


@per_session
def get_by_name(session: Session, name: str) -> Pipeline:
    row = repository.by_name(session, name)
    if row is None:
        raise NotFound(
            f"no pipeline named {name!r}; pipelines are created by their first run "
            "(POST /api/v1/runs) or by PUT /api/v1/pipelines/{name}"
        )
    return row


def to_out(row: Pipeline, stats: tuple[int, datetime | None] = (0, None)) -> PipelineOut:
    out = PipelineOut.model_validate(row)
    out.run_count, last = stats
    if last is not None and last.tzinfo is None:  # SQLite aggregates lose the column type
        last = datetime.fromisoformat(str(last)).replace(tzinfo=UTC)
    out.last_run_at = last
    return out


def list_all(session: Session) -> list[PipelineOut]:
    rows = repository.by_names(session)
    stats = repository.run_stats(session, [r.id for r in rows])
    return [to_out(r, stats.get(r.id, (0, None))) for r in rows]


def describe(session: Session, name: str) -> PipelineOut:
    row = get_by_name(session, name)
    return to_out(row, repository.run_stats(session, [row.id]).get(row.id, (0, None)))


def upsert(
    session: WriteSession, name: str, update: PipelineUpdate, settings: Settings
) -> Pipeline:
    row = repository.by_name(session, name)
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


def count(session: Session) -> int:
    return repository.count(session)


def page(session: Session, *, offset: int = 0, limit: int | None = None) -> list[Pipeline]:
    """Pipelines in name order (the overview and the weekly review list them)."""
    return repository.by_names(session, offset=offset, limit=limit)
