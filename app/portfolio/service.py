"""The portfolio (the overview page and ``GET /api/v1/portfolio``): every visible
pipeline's projected month, month-to-date spend and goodput change, for all of them at
once (the totals need every pipeline, a page shows some). Goodput and spend come from
the rollup table (``analytics.org_weeks``), the monthly cost from the kept windows of
retraining costs (``analytics.costs``) and the month to date from ``analytics.month``,
all kept between requests while the pipelines' runs are unchanged: a fixed number of
queries whatever the number of pipelines."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta
from functools import partial

from sqlalchemy.orm import Session

from app.analytics import month
from app.analytics.org import OrgInputs, org_inputs
from app.db.kept import KeptMap
from app.exceptions import Invalid
from app.pipelines.service import Brief, decode_name_cursor, encode_name_cursor
from app.planning.month_to_date import MonthToDate
from app.planning.portfolio import PortfolioRow, PortfolioTotals, portfolio_totals, sort_rows
from app.planning.weekly import iso_week, last_complete_week, monday_of
from app.portfolio.schemas import PortfolioOut, PortfolioRowOut, PortfolioTotalsOut

# The whole portfolio by (day, token's pipelines, team) while its inputs are as read.
KEPT_PORTFOLIO: KeptMap[tuple[object, ...], Portfolio] = KeptMap("portfolio")


@dataclass(frozen=True)
class Portfolio:
    """Every visible pipeline's row, in name order, their totals and the teams; each
    order asked for is sorted once and kept with it."""

    rows: list[PortfolioRow]
    teams: list[str]
    totals: PortfolioTotals
    pipelines: tuple[Brief, ...]  # in name order, as the rows
    orders: dict[str, list[PortfolioRow]] = field(default_factory=dict, compare=False)

    def __getstate__(self) -> dict[str, object]:
        # Written to the database without its memo (the rows sorted again): smaller, and
        # never a dict another thread fills while it is written (app.db.kept_snapshot).
        return {**self.__dict__, "orders": {}}

    def ordered(self, sort: str) -> list[PortfolioRow]:
        found = self.orders.get(sort)
        if found is None:
            found = self.orders[sort] = sort_rows(self.rows, sort)
        return found


def load_portfolio(
    session: Session, only: Sequence[str] | None, team: str | None, today: date
) -> Portfolio:
    """The portfolio of every visible pipeline (``only``: a token's limit; of ``team``
    when given). Its inputs are kept between requests (the weeks, costs and month to
    date), and so is the whole while they are the same (the kept map ``portfolio``): a warm
    request reads the pipelines and their change counters and builds no row."""
    # Goodput change: the last complete week against the one before (the review's weeks);
    # month to date: every run this month up to now (the window ends with this week).
    given = org_inputs(session, only, team, monday_of(today))
    months = month.months(session, given.pipelines)
    slot = (today, tuple(only) if only is not None else None, team)
    return KEPT_PORTFOLIO.get(
        session, (slot, (given.key, months)), partial(_portfolio, given, months, today)
    )


def _portfolio(given: OrgInputs, months: dict[int, MonthToDate], today: date) -> Portfolio:
    monday = last_complete_week(today)
    window, rows = given.window, []
    for p in given.pipelines:
        a = window.overall(p.id, monday)
        b = window.overall(p.id, monday - timedelta(weeks=1))
        mtd = months[p.id]
        rows.append(
            PortfolioRow(
                name=p.name,
                owner=p.owner,
                monthly_cost_usd=given.costs.get(p.id),
                budget_usd=p.monthly_budget_usd,
                month_to_date_usd=mtd.spend_to_date_usd,
                goodput_change_points=None if a is None or b is None else 100.0 * (a - b),
                status=mtd.status,
                month_to_date=mtd,
            )
        )
    return Portfolio(rows, given.teams, portfolio_totals(rows), tuple(given.pipelines))


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
    portfolio = load_portfolio(session, only, team, today)
    ordered = portfolio.ordered(sort)
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
        totals=PortfolioTotalsOut.model_validate(portfolio.totals),
        teams=portfolio.teams,
        pipelines=[PortfolioRowOut.model_validate(r, from_attributes=True) for r in shown],
        total=len(ordered),
        next_cursor=encode_name_cursor(shown[-1].name) if more and shown else None,
    )
