"""The budget words and the one test behind every one of them (docs/methodology.md §5).

"Fits", "within" and "over" all come from :func:`fits_budget`: P(bill > budget)
against the risk tolerance (``CADENCE_RISK_TOLERANCE``, 10% by default; the same as
"the p90 bill is within the budget" at 10%). :func:`budget_status` words a month with
it (this month: spend to date first; a typical month at a cadence: nothing spent yet).
Nothing judges the expected bill alone.

Apart from :mod:`app.planning.month_to_date` (which needs numpy) so that the settings,
which hold the thresholds, import nothing heavy.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from app.planning.model import PlanningError

DEFAULT_RISK_TOLERANCE = 0.1
"""P(bill > budget) a plan may carry and still "fit" (CADENCE_RISK_TOLERANCE)."""


class BudgetStatus(StrEnum):
    """The budget words, spelt once (methodology.md §5.4)."""

    OVER = "over"  # spend to date already exceeds the budget
    LIKELY_OVER = "likely_over"  # P(end-of-month bill > budget) >= likely_over threshold
    AT_RISK = "at_risk"  # P >= the risk tolerance
    WITHIN = "within"  # P below the risk tolerance: the plan "fits"


@dataclass(frozen=True)
class StatusThresholds:
    """P(over budget) at which a month is ``likely_over`` (50%) or ``at_risk`` (the risk
    tolerance, 10%)."""

    likely_over: float = 0.5
    at_risk: float = DEFAULT_RISK_TOLERANCE

    @property
    def risk_tolerance(self) -> float:
        """The one test's tolerance: a plan fits while P(bill > budget) is below it."""
        return self.at_risk

    def __post_init__(self) -> None:
        if not 0 < self.at_risk <= self.likely_over <= 1:
            raise PlanningError("status thresholds: need 0 < at_risk <= likely_over <= 1")


def fits_budget(p_over_budget: float, risk_tolerance: float = DEFAULT_RISK_TOLERANCE) -> bool:
    """The one test: a bill fits its budget when P(bill > budget) < the risk tolerance.

    At 10% this is "the p90 bill is within the budget": P(B > budget) < 0.1 exactly when
    less than a tenth of the months go over, i.e. the 90th percentile does not."""
    return p_over_budget < risk_tolerance


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
    if not fits_budget(p_over_budget, th.risk_tolerance):
        return BudgetStatus.AT_RISK
    return BudgetStatus.WITHIN
