"""Pipeline queries beyond look-ups by name."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.db.models import Pipeline


def created_by_token_since(session: Session, token_id: int, since: datetime) -> list[datetime]:
    """When the pipelines this token created since ``since`` were created, oldest first."""
    stmt = (
        select(Pipeline.created_at)
        .where(Pipeline.created_by_token_id == token_id, Pipeline.created_at >= since)
        .order_by(Pipeline.created_at)
    )
    return list(session.scalars(stmt))
