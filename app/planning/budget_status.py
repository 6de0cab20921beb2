"""The budget status words and when each applies (docs/methodology.md §5.4).

Apart from :mod:`app.planning.month_to_date` (which needs numpy) so that the settings,
which hold the thresholds, import nothing heavy.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from app.planning.model import PlanningError


class BudgetStatus(StrEnum):
    """The budget words, spelt once (methodology.md §5.4)."""

    OVER = "over"  # spend to date already exceeds the budget
    LIKELY_OVER = "likely_over"  # P(end-of-month bill > budget) >= likely_over threshold
    AT_RISK = "at_risk"  # P >= at_risk threshold
    WITHIN = "within"


@dataclass(frozen=True)
class StatusThresholds:
    """P(over budget) at which a month is ``likely_over`` (50%) or ``at_risk`` (10%)."""

    likely_over: float = 0.5
    at_risk: float = 0.1

    def __post_init__(self) -> None:
        if not 0 < self.at_risk <= self.likely_over <= 1:
            raise PlanningError("status thresholds: need 0 < at_risk <= likely_over <= 1")


def budget_status(
    spend_to_date_usd: float,
    p_over_budget: float,
    budget_usd: float,
    thresholds: StatusThresholds | None = None,
) -> BudgetStatus:
    """``over`` if spend to date > budget, else by P(end-of-month bill > budget)."""
    th = thresholds or StatusThresholds()
    if spend_to_date_usd > budget_usd:
        return BudgetStatus.OVER
    if p_over_budget >= th.likely_over:
        return BudgetStatus.LIKELY_OVER
    if p_over_budget >= th.at_risk:
        return BudgetStatus.AT_RISK
    return BudgetStatus.WITHIN
