"""The portfolio API: every visible pipeline's month against its budget, totals first."""

from __future__ import annotations

from pydantic import Field

from app.planning.budget_status import BudgetStatus
from app.planning.month_to_date import MonthToDate
from app.schemas_common import OutModel


class PortfolioTotalsOut(OutModel):
    pipelines: int = Field(description="Visible pipelines (of the team, when filtered)")
    monthly_spend_usd: float = Field(
        description="Sum of the expected bills of a typical month at current cadences "
        "(pipelines that have one): budgeted_monthly_usd + unbudgeted_monthly_usd"
    )
    budget_usd: float = Field(
        description="Sum of the budgets compared: those of budgeted pipelines with an "
        "expected bill (held against budgeted_monthly_usd)"
    )
    month_to_date_usd: float = Field(description="Recorded spend this calendar month (UTC)")
    over_budget: int = Field(
        description="Budgeted pipelines that do not fit: status other than within (the one "
        "test, P(bill > budget) against CADENCE_RISK_TOLERANCE), whatever the expected bill"
    )
    over_budget_usd: float = Field(
        description="Sum of those pipelines' expected bills above their budgets (0 for one "
        "whose expected bill is under its budget but whose chance over is too high)"
    )
    budgeted_monthly_usd: float = Field(
        description="The expected bills of budgeted pipelines, against budget_usd"
    )
    unbudgeted_monthly_usd: float = Field(
        description="The monthly figures of pipelines without a budget (never held against "
        "the others' budgets)"
    )
    statuses: dict[str, int] = Field(
        description="Pipelines per budget status this month: over, likely_over, at_risk, within"
    )


class PortfolioRowOut(OutModel):
    name: str
    owner: str
    monthly_cost_usd: float | None = Field(
        description="The expected bill of a typical month at the current cadence (production "
        "variant); the pipeline page's and /metrics' figure. Null: no runs of the "
        "production variant"
    )
    expected_bill_usd: float | None = Field(
        description="The same figure as monthly_cost_usd, under its name: the expected bill "
        "of a typical month at the current cadence (monthly_cost_usd stays one release)"
    )
    budget_usd: float | None
    over_budget_usd: float | None = Field(
        description="Expected bill minus budget (positive = above it; a sort key, not a "
        "verdict: the verdict is status)"
    )
    month_to_date_usd: float
    status: BudgetStatus | None = Field(
        description="This month's budget status (the same word as the pipeline page, the "
        "review and /metrics); null without a budget"
    )
    month_to_date: MonthToDate
    goodput_change_points: float | None = Field(
        description="Overall goodput of the last complete ISO week minus the week before's"
    )


class PortfolioOut(OutModel):
    month: str = Field(description="The calendar month of month_to_date_usd, e.g. 2026-12")
    week: str = Field(description="The last complete ISO week (UTC), e.g. 2026-W48")
    totals: PortfolioTotalsOut = Field(description="Over every row, on every page")
    teams: list[str]
    pipelines: list[PortfolioRowOut]
    total: int = Field(description="Rows on all pages")
    next_cursor: str | None = Field(
        description="Pass as ?cursor= (same sort and team) for the next page; null on the last"
    )
