"""Pipeline queries."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.db.models import Pipeline, Run


def by_name(session: Session, name: str) -> Pipeline | None:
    return session.scalar(select(Pipeline).where(Pipeline.name == name))


def run_stats(session: Session, ids: list[int]) -> dict[int, tuple[int, datetime | None]]:
    """Run count and latest start per pipeline id."""
    rows = session.execute(
        select(Run.pipeline_id, func.count(), func.max(Run.started_at))
        .where(Run.pipeline_id.in_(ids))
        .group_by(Run.pipeline_id)
    )
    return {pid: (count, last) for pid, count, last in rows}


def count(session: Session) -> int:
    return session.scalar(select(func.count()).select_from(Pipeline)) or 0


def by_names(session: Session, *, offset: int = 0, limit: int | None = None) -> list[Pipeline]:
    """Pipelines in name order, optionally one page of them."""
    stmt = select(Pipeline).order_by(Pipeline.name).offset(offset)
    if limit is not None:
        stmt = stmt.limit(limit)
    return list(session.scalars(stmt))
