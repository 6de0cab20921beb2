"""SQL expressions that more than one feature's repository builds on."""

from __future__ import annotations

from sqlalchemy import ColumnElement, func
from sqlalchemy.orm import Session

from app.db.models import Pipeline, Run


def dialect(session: Session) -> str:
    """``"postgresql"`` or ``"sqlite"``: the few queries that differ branch on it."""
    return session.get_bind().dialect.name


def effective_price() -> ColumnElement[float]:
    """The run's own price per GPU-hour, else its pipeline's (needs the pipeline joined)."""
    return func.coalesce(Run.price_per_gpu_hour, Pipeline.price_per_gpu_hour)
