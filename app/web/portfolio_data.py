"""Where the portfolio's numbers come from: every visible pipeline's projected month,
month-to-date spend and goodput change, for all of them at once (the totals need every
pipeline, the page shows 24). Goodput and spend come from the rollup table and the
projected month from one query of median costs, all through services: a fixed number
of queries whatever the number of pipelines."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, timedelta

from sqlalchemy.orm import Session

from app.analytics import service as analytics
from app.analytics import weekly as analytics_weekly
from app.db.models import Pipeline
from app.pipelines import service as pipelines
from app.planning.weekly import fill_weeks, last_complete_week, monday_of
from app.web.portfolio import PortfolioRow


def load_portfolio(
    session: Session, only: Sequence[str] | None, team: str | None, today: date
) -> tuple[list[Pipeline], list[PortfolioRow], list[str]]:
    """Every visible pipeline (``only``: a token's limit; of ``team`` when given), its
    portfolio row (same order) and the teams."""
    listed = pipelines.page(session, only=only, owner=team)
    teams = pipelines.teams(session, only=only)
    # Goodput change: the last complete week against the one before (the review's weeks);
    # month to date: every run this month up to now.
    monday = last_complete_week(today)
    previous = monday - timedelta(weeks=1)
    following = monday_of(today) + timedelta(weeks=1)
    # Every pipeline: no list of ids to send (5,000 of them would be 5,000 parameters).
    ids = None if only is None and team is None else [p.id for p in listed]
    weekly = analytics_weekly.org_week_totals(session, previous, monday + timedelta(weeks=1), ids)
    spent = analytics_weekly.month_spend(session, today.replace(day=1), following, ids)
    costs = analytics.current_monthly_costs(session, listed)
    rows = []
    for p in listed:
        last, this = fill_weeks(weekly.get(p.id, []), previous, monday)
        a, b = this.goodput.overall, last.goodput.overall
        rows.append(
            PortfolioRow(
                name=p.name,
                owner=p.owner,
                monthly_cost_usd=costs.get(p.id),
                budget_usd=p.monthly_budget_usd,
                month_to_date_usd=spent.get(p.id, 0.0),
                goodput_change_points=None if a is None or b is None else 100.0 * (a - b),
            )
        )
    return listed, rows, teams
