"""``GET /api/v1/portfolio``: the overview page's totals and rows, as JSON."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import Response

from app.auth.service import visible_pipelines
from app.deps import Admin, DatabaseDep, Viewer
from app.planning.portfolio import SORTS
from app.portfolio import plan as org
from app.portfolio import service
from app.portfolio.plan_output import plan_csv, plan_out
from app.portfolio.plan_schemas import Budget, OrgBudgetIn, OrgBudgetOut, OrgPlanOut, Risk
from app.portfolio.schemas import PortfolioOut

MAX_PAGE = 1000
router = APIRouter(prefix="/api/v1/portfolio", tags=["portfolio"])


@router.get("", response_model=PortfolioOut)
def portfolio(
    db: DatabaseDep,
    viewer: Viewer,
    team: Annotated[str | None, Query(max_length=200)] = None,
    sort: Annotated[str, Query(pattern="^(" + "|".join(SORTS) + ")$")] = "name",
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 100,
    cursor: Annotated[str | None, Query(max_length=400)] = None,
) -> PortfolioOut:
    """Every pipeline the token may see (of `team`, when given): totals over all of them
    on every page, then `limit` rows in `sort` order (`name`, `spend` and `over_budget`
    largest first, `goodput_change` largest drop first); `next_cursor` gives the next
    page. The same figures as the overview page."""
    today = datetime.now(UTC).date()
    with db.read() as session:
        return service.page(
            session,
            visible_pipelines(viewer),
            team=team or None,
            sort=sort,
            cursor=cursor,
            limit=limit,
            today=today,
        )


Team = Annotated[str | None, Query(max_length=200)]


@router.get("/plan", response_model=OrgPlanOut)
def plan(
    db: DatabaseDep, viewer: Viewer, budget: Budget = None, risk: Risk = None, team: Team = None
) -> OrgPlanOut:
    """The organisation's cadence plan (docs/dashboard.md): with one monthly budget
    (default: the org budget set by an admin) and a risk tolerance (default 0.1), the
    cadence of each pipeline that minimises expected bill plus staleness cost while
    P(org bill > budget) <= risk. The answer in words first, then one row per pipeline."""
    with db.read() as session:
        found, missing = org.org_plan(
            session, visible_pipelines(viewer), team or None, budget, risk
        )
    return plan_out(found, team or None, missing)


@router.get("/plan.csv", response_class=Response)
def plan_as_csv(
    db: DatabaseDep, viewer: Viewer, budget: Budget = None, risk: Risk = None, team: Team = None
) -> Response:
    """The plan's table as CSV, one row per pipeline."""
    answer = plan(db, viewer, budget, risk, team)
    return Response(
        plan_csv(answer),
        media_type="text/csv",
        headers={"Content-Disposition": 'attachment; filename="cadence-plan.csv"'},
    )


@router.get("/budget", response_model=OrgBudgetOut)
def budget_setting(db: DatabaseDep, viewer: Viewer) -> OrgBudgetOut:
    """The org budget and risk tolerance the plan uses when the query names none."""
    with db.read() as session:
        budget, risk = org.org_budget(session)
    return OrgBudgetOut(budget_usd=budget, risk=risk)


@router.put("/budget", response_model=OrgBudgetOut)
def set_budget_setting(body: OrgBudgetIn, db: DatabaseDep, token: Admin) -> OrgBudgetOut:
    """Set the org budget (admin, a token not limited to some pipelines)."""
    org.check_org_admin(token)
    with db.write() as session:
        org.set_org_budget(session, body.budget_usd, body.risk, token.name)
    return OrgBudgetOut(budget_usd=body.budget_usd, risk=body.risk)
