"""Where the portfolio's numbers come from (behind one function, so a rollup table or a
cache can replace it): every visible pipeline's projected month, month-to-date spend and
goodput change, in three queries plus the projection per pipeline, all through services."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, date, datetime, timedelta

from sqlalchemy.orm import Session

from app.analytics import service as analytics
from app.analytics import weekly as analytics_weekly
from app.db.models import Pipeline
from app.pipelines import service as pipelines
from app.planning.weekly import fill_weeks, monday_of, utc_midnight
from app.web.portfolio import PortfolioRow

PORTFOLIO_LIMIT = 5000


def load_portfolio(
    session: Session, only: Sequence[str] | None, team: str | None, today: date
) -> tuple[list[Pipeline], list[PortfolioRow], list[str]]:
    """Every visible pipeline (``only``: a token's limit; of ``team`` when given), its
    portfolio row (same order) and the teams."""
    listed = pipelines.page(session, limit=PORTFOLIO_LIMIT, only=only, owner=team)
    teams = pipelines.teams(session, only=only)
    monday = monday_of(today)
    since = utc_midnight(monday) - timedelta(weeks=1)
    weekly = analytics_weekly.week_totals(session, None, since, since + timedelta(weeks=2))
    month_start = datetime(today.year, today.month, 1, tzinfo=UTC)
    spent = analytics_weekly.recorded_spend(
        session, listed, month_start, since + timedelta(weeks=2)
    )
    rows = []
    for p in listed:
        last, this = fill_weeks(weekly.get(p.id, []), since.date(), monday)
        a, b = this.goodput.overall, last.goodput.overall
        rows.append(PortfolioRow(
            name=p.name, owner=p.owner,
            monthly_cost_usd=analytics.current_monthly_cost(session, p),
            budget_usd=p.monthly_budget_usd, month_to_date_usd=spent.get(p.id, 0.0),
            goodput_change_points=None if a is None or b is None else 100.0 * (a - b),
        ))  # fmt: skip
    return listed, rows, teams
