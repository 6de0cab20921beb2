"""``GET /api/v1/portfolio``: the overview page's totals and rows, as JSON."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Query

from app.auth.service import visible_pipelines
from app.deps import DatabaseDep, Viewer
from app.planning.portfolio import SORTS
from app.portfolio import service
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
