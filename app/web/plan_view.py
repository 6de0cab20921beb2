"""The overview's cadence plan section: folded (the org budget read, nothing planned,
so the overview keeps its speed) unless the link asks for it (``plan=1``, with the
what-if ``budget`` and ``risk``, which the link keeps)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy.orm import Session

from app.exceptions import Invalid
from app.portfolio import plan as org
from app.portfolio.plan_output import plan_out
from app.portfolio.plan_schemas import OrgPlanOut


@dataclass(frozen=True)
class PlanSection:
    opened: bool
    budget_usd: float | None  # what the form shows: the what-if, else the org budget
    risk: float
    plan: OrgPlanOut | None
    problem: str | None  # why no plan is shown although asked for


def plan_section(
    session: Session,
    only: Sequence[str] | None,
    team: str | None,
    *,
    opened: bool,
    budget: float | None,
    risk: float | None,
) -> PlanSection:
    stored, stored_risk = org.org_budget(session)
    shown_budget = budget if budget is not None else stored
    shown_risk = risk if risk is not None else stored_risk
    if not opened:
        return PlanSection(False, shown_budget, shown_risk, None, None)
    try:
        found, missing = org.org_plan(session, only, team, budget, risk)
    except Invalid:
        return PlanSection(True, None, shown_risk, None, "Enter a monthly budget to plan for.")
    return PlanSection(True, shown_budget, shown_risk, plan_out(found, team, missing), None)
