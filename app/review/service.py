"""Where the weekly review's numbers come from: the database side, behind two functions
(``load_review`` and ``top_actions``). Sums come from the rollup table through
``analytics.weekly``, so every pipeline is in the review (thousands of them cost a few
rows each) and the page only chooses which 100 lines to show. Every read goes through
a service (pipelines, analytics)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from functools import partial
from typing import Any

from sqlalchemy.orm import Session

from app.analytics import advice
from app.analytics.missing import NotEnoughData
from app.analytics.month import months
from app.analytics.org import OrgInputs, org_inputs
from app.db.kept import KeptMap
from app.pipelines import service as pipelines
from app.planning.budget_status import BudgetStatus
from app.planning.month_to_date import MonthToDate
from app.planning.scenario import Scenario
from app.planning.weekly import WeekSummary
from app.review.lines import MonthSpend, PipelineInfo, ReviewLine, lines_of, review_month, total_of

# The whole review by (month, week, token's pipelines, team) while its inputs are as read.
KEPT_REVIEW: KeptMap[tuple[object, ...], ReviewData] = KeptMap("review")

ACTION_PIPELINES = 5  # levers are computed for the pipelines with the largest badput
TOP_ACTIONS = 5


@dataclass(frozen=True)
class ReviewData:
    pipelines: list[PipelineInfo]
    weeks: dict[str, tuple[WeekSummary, WeekSummary]]  # by name: (week before, week)
    teams: list[str]
    months: dict[str, MonthSpend]  # by pipeline name: the budget cell
    month: date  # the month (its 1st) of the budget cell (lines.review_month)
    trend: list[WeekSummary]  # the WINDOW_WEEKS (12) weeks, every listed pipeline summed
    lines: list[ReviewLine]  # one per pipeline, largest waste first (lines.lines_of)
    total: ReviewLine  # every line together (lines.total_of)
    # What is made from the lines once and kept with them (the export's rows and CSV).
    made: dict[str, Any] = field(default_factory=dict, compare=False)

    def __getstate__(self) -> dict[str, object]:
        # Written to the database without its memo (the export made again): smaller, and
        # never a dict another thread fills while it is written (app.db.kept_snapshot).
        return {**self.__dict__, "made": {}}


@dataclass(frozen=True)
class Action:
    pipeline: PipelineInfo
    label: str
    remedy: str
    usd_per_month: float
    saving_usd_per_month: float  # if the cause is halved


def info(p: pipelines.Brief) -> PipelineInfo:
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
    given), none left out: each one's week and the week before, its month to the end of
    the week (recorded) and projected (the current monthly cost), and the twelve
    weeks summed over all of them, from the rollups (``analytics.org_weeks``, never the
    runs). The inputs are kept between requests, and so is the whole while they are the
    same (the kept map ``review``): a warm request builds no line."""
    given = org_inputs(session, only, team, monday)
    now = datetime.now(UTC)
    month = review_month(monday, now.date())
    this_month = month == now.date().replace(day=1)
    current = months(session, given.pipelines, now) if this_month else None
    slot = (month, monday, tuple(only) if only is not None else None, team)
    return KEPT_REVIEW.get(
        session, (slot, (given.key, current)), partial(_review, given, month, current)
    )


def _review(given: OrgInputs, month: date, current: dict[int, MonthToDate] | None) -> ReviewData:
    """The review from its inputs; ``current``: this month's month to date, when the
    budget cell is about this month."""
    window, rows = given.window, given.pipelines
    monday = window.last
    previous = monday - timedelta(weeks=1)
    infos = [info(p) for p in rows]
    weeks = {p.name: (window.summary(p.id, previous), window.summary(p.id, monday)) for p in rows}
    spends = {p.name: _spend(given, p, month, current) for p in rows}
    trend = window.together()
    budgets = [p.monthly_budget_usd for p in rows]
    total = total_of(trend[-2], trend[-1], spends.values(), budgets)
    lines = lines_of(infos, weeks, spends)
    return ReviewData(infos, weeks, given.teams, spends, month, trend, lines, total)


def _spend(
    given: OrgInputs, p: pipelines.Brief, month: date, current: dict[int, MonthToDate] | None
) -> MonthSpend:
    """One pipeline's budget cell: this month's expected bill with its word and chance
    (``current``), or a past month's recorded spend with its word."""
    spent = given.window.month_usd(p.id, month)
    typical = given.costs.get(p.id)
    m = current.get(p.id) if current else None
    if m is None:
        recorded = past_status(spent, p)
        return MonthSpend(spent, typical, recorded, spent if recorded else None)
    status = m.status.value if m.status else None
    figure = m.expected_end_of_month_usd if status else None
    return MonthSpend(spent, typical, status, figure, m.p_over_budget)


def past_status(spent: float, p: pipelines.Brief) -> str | None:
    """A finished month's budget word: what it recorded against the budget."""
    if p.monthly_budget_usd is None:
        return None
    return BudgetStatus.OVER.value if spent > p.monthly_budget_usd else BudgetStatus.WITHIN.value


def top_actions(session: Session, lines: list[ReviewLine]) -> list[Action]:
    """The ranked levers (``/levers``, production variant, current cadence) of the
    pipelines whose week cost most in badput, merged and ordered by what halving each
    cause would save per month."""
    found: list[Action] = []
    for line in lines[:ACTION_PIPELINES]:
        p = line.pipeline
        if p is None or line.this.runs == 0 or line.badput_usd <= 0:
            continue
        at_current_cadence = Scenario(cadence=p.runs_per_week)
        levers = advice.kept_levers(session, p.name, at_current_cadence)
        if isinstance(levers, NotEnoughData):  # no runs to rank levers on
            continue
        found.extend(
            Action(p, lever.label, lever.remedy, lever.usd_per_month, lever.saving_if_halved_usd)
            for lever in levers.levers
            if lever.billed and lever.saving_if_halved_usd > 0
        )
    found.sort(key=lambda a: -a.saving_usd_per_month)
    return found[:TOP_ACTIONS]
