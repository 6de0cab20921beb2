"""Where the portfolio's numbers come from (behind one function, so a rollup table or a
cache can replace it): every visible pipeline's projected month, month-to-date spend and
goodput change, in three queries plus the projection per pipeline."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

from sqlalchemy import ColumnElement, select
from sqlalchemy.orm import Session

from app.analytics import repository as repo
from app.analytics import service as analytics
from app.dashboard.portfolio import PortfolioRow
from app.db.models import Pipeline
from app.planning.weekly import fill_weeks

PORTFOLIO_LIMIT = 5000


def load_portfolio(
    session: Session, visible: ColumnElement[bool], team: str | None, today: date
) -> tuple[list[PortfolioRow], list[str]]:
    """The rows of every visible pipeline (of ``team`` when given) and the teams."""
    query = select(Pipeline).where(visible)
    if team:
        query = query.where(Pipeline.owner == team)
    pipelines = list(session.scalars(query.order_by(Pipeline.name).limit(PORTFOLIO_LIMIT)))
    teams = sorted(
        t for t in session.scalars(select(Pipeline.owner).where(visible).distinct()) if t
    )
    monday = today - timedelta(days=today.weekday())
    since = datetime(monday.year, monday.month, monday.day, tzinfo=UTC) - timedelta(weeks=1)
    weekly = repo.weekly_totals(session, None, since, since + timedelta(weeks=2))
    month_start = datetime(today.year, today.month, 1, tzinfo=UTC)
    ids = [p.id for p in pipelines]
    spent = repo.recorded_spend(session, ids, month_start, since + timedelta(weeks=2))
    rows = []
    for p in pipelines:
        last, this = fill_weeks(weekly.get(p.id, []), since.date(), monday)
        a, b = this.goodput.overall, last.goodput.overall
        rows.append(PortfolioRow(
            name=p.name, owner=p.owner,
            monthly_cost_usd=analytics.current_monthly_cost(session, p),
            budget_usd=p.monthly_budget_usd, month_to_date_usd=spent.get(p.id, 0.0),
            goodput_change_points=None if a is None or b is None else 100.0 * (a - b),
        ))  # fmt: skip
    return rows, teams
