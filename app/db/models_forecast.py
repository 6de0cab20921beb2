"""The forecast's own record: the bill forecast made for each calendar month, kept.

One row per pipeline and month, written once when the month's forecast is first made
(``app.analytics.record.record_months``, from the alert sweeper's thread) and never
rewritten: the insert skips a (pipeline, month) that has a row, so a second process, a
later wake or a retry leaves the first forecast as it was. Re-exported by
``app.db.models`` so Alembic sees it.
"""

from __future__ import annotations

from datetime import date, datetime

from sqlalchemy import CheckConstraint, Date, Double, ForeignKey, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base, BigIntPK, UTCDateTime

# How a stored forecast was made: at the time (the sweeper) or afterwards, from the runs
# that had started before the month (a backtest; the endpoint computes those on read).
FORECAST_SOURCES = ("recorded", "backtest")


class ForecastRecord(Base):
    """The bill forecast of one pipeline's calendar month (``month``: its first day, UTC)
    as made at ``forecast_at``: the expected bill, its p10-p90 band, P(bill > budget),
    the budget then and the status word (both null for an unbudgeted pipeline)."""

    __tablename__ = "forecast_record"

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True, autoincrement=True)
    pipeline_id: Mapped[int] = mapped_column(ForeignKey("pipeline.id", ondelete="CASCADE"))
    month: Mapped[date] = mapped_column(Date)
    forecast_at: Mapped[datetime] = mapped_column(UTCDateTime)
    expected_bill_usd: Mapped[float] = mapped_column(Double)
    bill_p10_usd: Mapped[float] = mapped_column(Double)
    bill_p90_usd: Mapped[float] = mapped_column(Double)
    p_over_budget: Mapped[float | None] = mapped_column(Double, nullable=True)
    budget_usd: Mapped[float | None] = mapped_column(Double, nullable=True)
    status: Mapped[str | None] = mapped_column(String(16), nullable=True)
    source: Mapped[str] = mapped_column(String(16), default="recorded")

    __table_args__ = (
        UniqueConstraint("pipeline_id", "month"),
        CheckConstraint("source IN ('recorded', 'backtest')", name="source_known"),
    )
