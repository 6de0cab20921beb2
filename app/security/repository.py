"""Signed-out session queries."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete
from sqlalchemy.orm import Session

from app.db.engine import WriteSession
from app.db.models import SignedOutSession


def is_signed_out(session: Session, sid: str) -> bool:
    return session.get(SignedOutSession, sid) is not None


def record_sign_out(session: WriteSession, sid: str, expires_at: datetime, now: datetime) -> None:
    """Remember a signed-out session until ``expires_at``; forget the expired ones."""
    session.execute(delete(SignedOutSession).where(SignedOutSession.expires_at < now))
    session.merge(SignedOutSession(sid=sid, expires_at=expires_at))
