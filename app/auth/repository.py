"""API token queries."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session

from app.db.engine import WriteSession
from app.db.models import ApiToken


def by_hash(session: Session, digest: str) -> ApiToken | None:
    return session.scalar(select(ApiToken).where(ApiToken.token_hash == digest))


def by_id(session: Session, token_id: int) -> ApiToken | None:
    return session.scalar(select(ApiToken).where(ApiToken.id == token_id))


def by_name(session: Session, name: str) -> ApiToken | None:
    return session.scalar(select(ApiToken).where(ApiToken.name == name))


def all_tokens(session: Session) -> list[ApiToken]:
    return list(session.scalars(select(ApiToken).order_by(ApiToken.created_at, ApiToken.id)))


def touch(session: WriteSession, token_id: int, now: datetime, stale: datetime) -> None:
    """Set last-used to ``now`` unless another request already did after ``stale``."""
    session.execute(
        update(ApiToken)
        .where(ApiToken.id == token_id)
        .where(or_(ApiToken.last_used_at.is_(None), ApiToken.last_used_at < stale))
        .values(last_used_at=now)
    )
