"""SQL expressions that more than one feature's repository builds on."""

from __future__ import annotations

from sqlalchemy import ColumnElement, func
from sqlalchemy.orm import Session

from app.db.models import Pipeline, Run


def dialect(session: Session) -> str:
    """``"postgresql"`` or ``"sqlite"``: the few queries that differ branch on it."""
    return session.get_bind().dialect.name


def effective_price() -> ColumnElement[float]:
    """The price projections use: the run's own, else its pipeline's *current* price (needs
    the pipeline joined), so a price change re-prices what the runs would cost from now on."""
    return func.coalesce(Run.price_per_gpu_hour, Pipeline.price_per_gpu_hour)


def recorded_price() -> ColumnElement[float]:
    """The price frozen on the run when it was stored (methodology.md §2): recorded spend."""
    return Run.billed_price_per_gpu_hour.expression
