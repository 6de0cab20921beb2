"""The bill's totals kept at import: each pipeline's reconciled figures of a month.

Kept apart from ``app.db.models`` (which re-exports them), as ``models_records`` is.
"""

from __future__ import annotations

from datetime import date

from sqlalchemy import Date, Double, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base


class BillTotal(Base):
    """One pipeline's reconciled month (``pipeline`` "" for the lines no pipeline
    claims), written by ``cadence import focus`` for every month its bill touches, so
    that reading the reconciliation reads a row a pipeline instead of the month's lines.
    ``runs_stamp`` is what the runs of the month were when it was written
    (``app.billing.repository.runs_stamp``): a row whose stamp moved is not read."""

    __tablename__ = "bill_total"

    month: Mapped[date] = mapped_column(Date, primary_key=True)
    pipeline: Mapped[str] = mapped_column(String(63), primary_key=True)
    billed_usd: Mapped[float] = mapped_column(Double)
    explained_usd: Mapped[float] = mapped_column(Double)
    billed_gpu_hours: Mapped[float] = mapped_column(Double)
    explained_gpu_hours: Mapped[float] = mapped_column(Double)
    recorded_gpu_hours: Mapped[float] = mapped_column(Double)
    lines: Mapped[int] = mapped_column(Integer)
    runs_stamp: Mapped[str] = mapped_column(String(64))
