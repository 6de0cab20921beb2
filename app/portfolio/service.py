"""The portfolio (the overview page and ``GET /api/v1/portfolio``): every visible
pipeline's projected month, month-to-date spend and goodput change, for all of them at
once (the totals need every pipeline, a page shows some). Goodput and spend come from
the rollup table (``analytics.org_weeks``) and the projected month from the median costs
(``analytics.costs``), both kept between requests while the pipelines' runs are
unchanged: a fixed number of queries whatever the number of pipelines."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, timedelta

from sqlalchemy.orm import Session

from app.analytics import month, org_weeks
from app.analytics import service as analytics
from app.exceptions import Invalid
from app.pipelines import service as pipelines
from app.pipelines.service import decode_name_cursor, encode_name_cursor
from app.planning.portfolio import PortfolioRow, portfolio_totals, sort_rows
from app.planning.weekly import iso_week, last_complete_week, monday_of
from app.portfolio.schemas import PortfolioOut, PortfolioRowOut, PortfolioTotalsOut


def load_portfolio(
    session: Session, only: Sequence[str] | None, team: str | None, today: date
) -> tuple[list[PortfolioRow], list[str]]:
    """The portfolio row of every visible pipeline (``only``: a token's limit; of
    ``team`` when given), in name order, and the teams."""
    listed = pipelines.briefs(session, only=only, owner=team)
    teams = pipelines.teams(session, only=only)
    # Goodput change: the last complete week against the one before (the review's weeks);
    # month to date: every run this month up to now (the window ends with this week).
    monday = last_complete_week(today)
    window = org_weeks.org_window(session, [p.id for p in listed], monday_of(today))
    costs = analytics.current_monthly_costs(session, listed)
    months = month.months(session, listed)
    rows = []
    for p in listed:
        a = window.overall(p.id, monday)
        b = window.overall(p.id, monday - timedelta(weeks=1))
        mtd = months[p.id]
        rows.append(
            PortfolioRow(
                name=p.name,
                owner=p.owner,
                monthly_cost_usd=costs.get(p.id),
                budget_usd=p.monthly_budget_usd,
                month_to_date_usd=mtd.spend_to_date_usd,
                goodput_change_points=None if a is None or b is None else 100.0 * (a - b),
                status=mtd.status,
                month_to_date=mtd,
            )
        )
    return rows, teams


def page(
    session: Session,
    only: Sequence[str] | None,
    *,
    team: str | None,
    sort: str,
    cursor: str | None,
    limit: int,
    today: date,
) -> PortfolioOut:
    """One page of the portfolio in ``sort`` order (the page's orders), with totals over
    every row. The cursor names the last row shown; the next page starts after it."""
    rows, teams = load_portfolio(session, only, team, today)
    ordered = sort_rows(rows, sort)
    start = 0
    if cursor is not None:
        after = decode_name_cursor(cursor)
        names = [r.name for r in ordered]
        if after not in names:
            raise Invalid(
                "cursor does not match this listing",
                fields=[
                    {
                        "field": "cursor",
                        "reason": "pass next_cursor back with the same sort and team",
                    }
                ],
            )
        start = names.index(after) + 1
    shown = ordered[start : start + limit]
    more = start + limit < len(ordered)
    return PortfolioOut(
        month=today.strftime("%Y-%m"),
        week=iso_week(last_complete_week(today)),
        totals=PortfolioTotalsOut.model_validate(portfolio_totals(rows)),
        teams=teams,
        pipelines=[PortfolioRowOut.model_validate(r, from_attributes=True) for r in shown],
        total=len(ordered),
        next_cursor=encode_name_cursor(shown[-1].name) if more and shown else None,
    )
