"""The org cadence plan as JSON (``GET /api/v1/portfolio/plan``)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query
from pydantic import Field

from app.schemas_common import OutModel, StrictModel

# Finite, >= 0 and below a trillion (an org budget, not an overflow); risk strictly 0..1.
Budget = Annotated[float | None, Query(ge=0, le=1e12, allow_inf_nan=False)]
Risk = Annotated[float | None, Query(gt=0, lt=1, allow_inf_nan=False)]


class PlanRowOut(OutModel):
    name: str
    today_runs_per_week: float
    proposed_runs_per_week: float
    bill_change_usd: float = Field(description="Expected bill a month, proposed minus today")
    staleness_change_usd: float | None = Field(
        description="Staleness cost a month, proposed minus today (null: no value curve)"
    )
    why: str
    needs_evaluations: bool
    faster_would_add_usd: float | None = Field(
        description="Without a value curve: the extra expected bill a month of the next "
        "faster cadence, what its evaluations would have to show is worth paying"
    )


class StepOut(OutModel):
    budget_usd: float
    feasible: bool
    saving_usd: float | None = Field(
        description="Bill plus staleness a month this plan saves against it (negative: costs)"
    )
    moves: list[str]
    sentence: str


class SensitivityOut(OutModel):
    pipeline: str
    input: str = Field(description="'value curve' (few evaluations) or 'bill spread'")
    at_half: str
    at_double: str


class OrgPlanOut(OutModel):
    budget_usd: float
    risk: float
    team: str | None
    feasible: bool = Field(description="P(org bill > budget) <= risk for the proposed plan")
    sentence: str = Field(description="The answer in words")
    expected_bill_usd: float
    bill_p90_usd: float
    p_over_budget: float
    today_expected_bill_usd: float
    change_usd: float = Field(description="Bill plus staleness a month, plan minus today")
    needed_budget_usd: float | None = Field(
        description="When no plan fits: the budget the slowest plan would need"
    )
    next_thousand: StepOut | None
    cut_thousand: StepOut | None
    sensitivity: list[SensitivityOut]
    pipelines: list[PlanRowOut]
    without_runs: list[str] = Field(
        description="Pipelines left out: no runs of their production variant to bill yet"
    )


class OrgBudgetIn(StrictModel):
    budget_usd: float | None = Field(
        ge=0, le=1e12, description="USD a month for every pipeline together (null: none)"
    )
    risk: float = Field(0.1, gt=0, lt=1, description="Share of months allowed over the budget")


class OrgBudgetOut(OutModel):
    budget_usd: float | None
    risk: float
