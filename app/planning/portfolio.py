"""The portfolio (overview) as pure functions: totals first, then pipelines sorted by
what a manager asks about (spend, amount over budget, goodput change)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from app.planning.budget_status import BudgetStatus
from app.planning.month_to_date import MonthToDate

SORTS = ("name", "spend", "over_budget", "goodput_change")


@dataclass(frozen=True)
class PortfolioRow:
    name: str
    owner: str
    monthly_cost_usd: float | None  # the expected bill of a typical month, current cadence
    budget_usd: float | None
    month_to_date_usd: float
    goodput_change_points: float | None  # this week against last, in points
    # The month-to-date status (app.planning.month_to_date), None without a budget.
    status: BudgetStatus | None = None
    month_to_date: MonthToDate | None = None

    @property
    def over_budget_usd(self) -> float | None:
        """Expected bill minus budget (positive = above it): a sort key and a sum, never a
        verdict (the verdict is ``status``, the one test)."""
        if self.monthly_cost_usd is None or self.budget_usd is None:
            return None
        return self.monthly_cost_usd - self.budget_usd

    @property
    def expected_bill_usd(self) -> float | None:
        """The figure under its name (``monthly_cost_usd`` is the same, its old name)."""
        return self.monthly_cost_usd

    @property
    def fits(self) -> bool | None:
        """The one test (budget_status.fits_budget through the month's status): None
        without a budget."""
        if self.status is None:
            return None
        return BudgetStatus(self.status) is BudgetStatus.WITHIN


@dataclass(frozen=True)
class PortfolioTotals:
    pipelines: int
    monthly_spend_usd: float  # sum of the expected bills that exist
    budget_usd: float  # sum of the budgets that are set
    month_to_date_usd: float
    over_budget: int  # budgeted pipelines that do not fit (status other than within)
    over_budget_usd: float  # sum of their expected bills above their budgets
    # Budgeted and unbudgeted pipelines' monthly figures apart: an unbudgeted pipeline's
    # spend is never held against the others' budgets. They add up to monthly_spend_usd.
    budgeted_monthly_usd: float = 0.0
    unbudgeted_monthly_usd: float = 0.0
    # Pipelines per month-to-date status word, every word present (0 when none).
    statuses: dict[str, int] = field(default_factory=dict)


def portfolio_totals(rows: Sequence[PortfolioRow]) -> PortfolioTotals:
    """Sums over the rows. Check: monthly $1,000 (budget $800, status over) + $300
    (no budget): spend $1,300 = budgeted $1,000 + unbudgeted $300; one over by $200.
    A pipeline counts as over when it does not fit (the one test), even with an expected
    bill under its budget; only the amounts above the budget are summed."""
    over = [max(r.over_budget_usd or 0.0, 0.0) for r in rows if r.fits is False]
    statuses = {s.value: 0 for s in BudgetStatus}
    for r in rows:
        if r.status is not None:
            statuses[BudgetStatus(r.status).value] += 1
    budgeted = sum(r.monthly_cost_usd or 0.0 for r in rows if r.budget_usd is not None)
    unbudgeted = sum(r.monthly_cost_usd or 0.0 for r in rows if r.budget_usd is None)
    return PortfolioTotals(
        pipelines=len(rows),
        monthly_spend_usd=sum(r.monthly_cost_usd or 0.0 for r in rows),
        budget_usd=sum(r.budget_usd or 0.0 for r in rows if r.monthly_cost_usd is not None),
        month_to_date_usd=sum(r.month_to_date_usd for r in rows),
        over_budget=len(over),
        over_budget_usd=sum(over),
        budgeted_monthly_usd=budgeted,
        unbudgeted_monthly_usd=unbudgeted,
        statuses=statuses,
    )


def sort_rows(rows: Sequence[PortfolioRow], key: str) -> list[PortfolioRow]:
    """Largest first for spend and over-budget, worst (largest drop) first for goodput
    change; pipelines without the figure go last; ties by name."""
    if key not in SORTS:
        raise ValueError(f"sort must be one of {', '.join(SORTS)}")
    if key == "name":
        return sorted(rows, key=lambda r: r.name)

    def value(r: PortfolioRow) -> float | None:
        if key == "spend":
            return None if r.monthly_cost_usd is None else -r.monthly_cost_usd
        if key == "over_budget":
            return None if r.over_budget_usd is None else -r.over_budget_usd
        return r.goodput_change_points

    return sorted(rows, key=lambda r: (value(r) is None, value(r) or 0.0, r.name))
