"""Where the weekly review's numbers come from: the database side, behind two functions
(``load_review`` and ``top_actions``). Sums come from the rollup table through
``analytics.weekly``, so every pipeline is in the review (thousands of them cost a few
rows each) and the page only chooses which 100 lines to show. Every read goes through
a service (pipelines, analytics)."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, timedelta

from sqlalchemy.orm import Session

from app.analytics import advice
from app.analytics import service as analytics
from app.analytics import weekly as analytics_weekly
from app.db.models import Pipeline
from app.exceptions import CadenceError
from app.pipelines import service as pipelines
from app.planning.scenario import Scenario
from app.planning.weekly import WeekTotals
from app.web.review_view import TREND_WEEKS, MonthSpend, PipelineInfo, ReviewLine

ACTION_PIPELINES = 5  # levers are computed for the pipelines with the largest badput
TOP_ACTIONS = 5


@dataclass(frozen=True)
class ReviewData:
    pipelines: list[PipelineInfo]
    totals: dict[str, list[WeekTotals]]  # by pipeline name, the trend's weeks
    teams: list[str]
    months: dict[str, MonthSpend]  # by pipeline name: the budget cell
    trend: list[WeekTotals]  # the TREND_WEEKS weeks, every listed pipeline summed


@dataclass(frozen=True)
class Action:
    pipeline: PipelineInfo
    label: str
    remedy: str
    usd_per_month: float
    saving_usd_per_month: float  # if the cause is halved


def info(p: Pipeline) -> PipelineInfo:
    return PipelineInfo(
        p.name,
        p.display_name or p.name,
        p.owner,
        p.monthly_budget_usd,
        p.production_variant,
        p.runs_per_week,
    )


def load_review(
    session: Session, only: Sequence[str] | None, monday: date, team: str | None
) -> ReviewData:
    """Every pipeline the viewer may see (``only``: a token's limit; of ``team`` when
    given), none left out: each one's week and the week before, and the ``TREND_WEEKS``
    weeks summed over all of them, from the rollups (a few rows per pipeline and week,
    never the runs)."""
    rows = pipelines.page(session, only=only, owner=team)
    teams = pipelines.teams(session, only=only)
    # Every pipeline: no list of ids to send (5,000 of them would be 5,000 parameters).
    ids = None if only is None and team is None else [p.id for p in rows]
    following = monday + timedelta(weeks=1)
    sums = analytics_weekly.org_week_totals(session, monday - timedelta(weeks=1), following, ids)
    totals = {p.name: list(sums.get(p.id, [])) for p in rows}
    first = monday - timedelta(weeks=TREND_WEEKS - 1)
    together = analytics_weekly.org_week_totals(session, first, following, ids, only=None)
    return ReviewData(
        [info(p) for p in rows],
        totals,
        teams,
        month_spend(session, rows, ids, monday),
        together.get(0, []),
    )


def month_spend(
    session: Session, rows: list[Pipeline], ids: Sequence[int] | None, monday: date
) -> dict[str, MonthSpend]:
    """Recorded spend from the 1st of ``monday``'s month to the end of its week, and
    the projected month at the current cadence (the production variant's median cost per
    run, the figure the overview, /metrics and alerts show), for all rows at once."""
    following = monday + timedelta(weeks=1)
    spent = analytics_weekly.month_spend(session, monday.replace(day=1), following, ids)
    costs = analytics.current_monthly_costs(session, rows)
    return {p.name: MonthSpend(spent.get(p.id, 0.0), costs.get(p.id)) for p in rows}


def top_actions(session: Session, lines: list[ReviewLine]) -> list[Action]:
    """The ranked levers (``/levers``, production variant, current cadence) of the
    pipelines whose week cost most in badput, merged and ordered by what halving each
    cause would save per month."""
    found: list[Action] = []
    for line in lines[:ACTION_PIPELINES]:
        p = line.pipeline
        if p is None or line.this.runs == 0 or line.badput_usd <= 0:
            continue
        try:
            at_current_cadence = Scenario(cadence=p.runs_per_week)
            levers = advice.levers(session, p.name, variant=None, scenario=at_current_cadence)
        except (CadenceError, statistics.StatisticsError):  # no runs to rank levers on
            continue
        found.extend(
            Action(p, lever.label, lever.remedy, lever.usd_per_month, lever.saving_if_halved_usd)
            for lever in levers.levers
            if lever.billed and lever.saving_if_halved_usd > 0
        )
    found.sort(key=lambda a: -a.saving_usd_per_month)
    return found[:TOP_ACTIONS]
