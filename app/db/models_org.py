"""Organisation-wide settings: the org budget and risk tolerance the cadence plan reads
(``GET /api/v1/portfolio/plan``, the overview's plan section), set by an admin on the
settings page. One row (id 1); none stored: the plan asks for a budget."""

from __future__ import annotations

from sqlalchemy import CheckConstraint, Double, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from app.db.base import Base, CreatedAt


class OrgSetting(CreatedAt, Base):
    __tablename__ = "org_setting"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    # USD a month for every pipeline's retraining together.
    budget_usd: Mapped[float | None] = mapped_column(Double, nullable=True)
    # The share of months allowed over the budget (10% by default, as for every budget verdict).
    risk: Mapped[float] = mapped_column(Double, default=0.1, server_default="0.1")
    updated_by: Mapped[str] = mapped_column(String(200), default="")

    __table_args__ = (
        CheckConstraint("budget_usd IS NULL OR budget_usd >= 0", name="budget_non_negative"),
        CheckConstraint("risk > 0 AND risk < 1", name="risk_fraction"),
    )
