"""The portfolio (overview) as pure functions: totals first, then pipelines sorted by
what a manager asks about (spend, amount over budget, goodput change)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

SORTS = ("name", "spend", "over_budget", "goodput_change")


@dataclass(frozen=True)
class PortfolioRow:
    name: str
    owner: str
    monthly_cost_usd: float | None  # projected month at the current cadence
    budget_usd: float | None
    month_to_date_usd: float
    goodput_change_points: float | None  # this week against last, in points

    @property
    def over_budget_usd(self) -> float | None:
        if self.monthly_cost_usd is None or self.budget_usd is None:
            return None
        return self.monthly_cost_usd - self.budget_usd


@dataclass(frozen=True)
class PortfolioTotals:
    pipelines: int
    monthly_spend_usd: float  # sum of the projections that exist
    budget_usd: float  # sum of the budgets that are set
    month_to_date_usd: float
    over_budget: int  # pipelines whose projection is above their budget
    over_budget_usd: float  # sum of the amounts over


def portfolio_totals(rows: Sequence[PortfolioRow]) -> PortfolioTotals:
    over = [r.over_budget_usd for r in rows if (r.over_budget_usd or 0.0) > 0]
    return PortfolioTotals(
        pipelines=len(rows),
        monthly_spend_usd=sum(r.monthly_cost_usd or 0.0 for r in rows),
        budget_usd=sum(r.budget_usd or 0.0 for r in rows),
        month_to_date_usd=sum(r.month_to_date_usd for r in rows),
        over_budget=len(over),
        over_budget_usd=sum(o for o in over if o is not None),
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
