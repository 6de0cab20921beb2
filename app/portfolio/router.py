"""``GET /api/v1/portfolio``: the overview page's totals and rows, as JSON."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Query
from fastapi.responses import Response

from app.auth.service import visible_pipelines
from app.deps import DatabaseDep, Viewer
from app.planning.portfolio import SORTS
from app.portfolio import plan as org
from app.portfolio import service
from app.portfolio.plan_output import plan_csv, plan_out
from app.portfolio.plan_schemas import OrgPlanOut
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
# Finite, >= 0 and below a trillion (an org budget, not an overflow); risk strictly 0..1.
Budget = Annotated[float | None, Query(ge=0, le=1e12, allow_inf_nan=False)]
Risk = Annotated[float | None, Query(gt=0, lt=1, allow_inf_nan=False)]


@router.get("/plan", response_model=OrgPlanOut)
def plan(db: DatabaseDep, viewer: Viewer, budget: Budget = None, risk: Risk = None,
         team: Team = None) -> OrgPlanOut:  # fmt: skip
    """The organisation's cadence plan (DOMAIN.md section 10): with one monthly budget
    (default: the org budget set by an admin) and a risk tolerance (default 0.1), the
    cadence of each pipeline that minimises expected bill plus staleness cost while
    P(org bill > budget) <= risk. The answer in words first, then one row per pipeline."""
    with db.read() as session:
        found, missing = org.org_plan(
            session, visible_pipelines(viewer), team or None, budget, risk
        )
    return plan_out(found, team or None, missing)


@router.get("/plan.csv", response_class=Response)
def plan_as_csv(db: DatabaseDep, viewer: Viewer, budget: Budget = None, risk: Risk = None,
                team: Team = None) -> Response:  # fmt: skip
    """The plan's table as CSV, one row per pipeline."""
    answer = plan(db, viewer, budget, risk, team)
    return Response(
        plan_csv(answer),
        media_type="text/csv",
        headers={"Content-Disposition": 'attachment; filename="cadence-plan.csv"'},
    )
