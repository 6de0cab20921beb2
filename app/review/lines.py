"""The weekly review as pure functions: which week, one line per pipeline, the totals,
the 12-week trend and the export rows. No database: the sums arrive as ``WeekTotals``
(one SQL GROUP BY), so the data source can change (e.g. rollup tables) without touching
what is shown.

Weeks are ISO weeks in UTC (Monday 00:00 UTC to the next Monday), because run times are
stored and grouped in UTC.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

from app.planning.causes import BADPUT_CAUSES
from app.planning.weekly import WeekSummary, iso_week


def review_month(monday: date, today: date) -> date:
    """The month (its 1st) the review's budget cell is about: the month the week ends in,
    or today's for the week in progress, so a week from Monday 30 November shows December
    to date once December has begun (the month to date every other page shows), not a
    November that has ended. Check: Mon 2026-11-30 on Tue 2026-12-01 -> 2026-12-01; on
    Mon 2026-11-30 -> 2026-11-01; Mon 2026-11-23 (ends Sun 29th) -> 2026-11-01."""
    return min(monday + timedelta(days=6), today).replace(day=1)


@dataclass(frozen=True)
class PipelineInfo:
    name: str
    display_name: str
    owner: str
    monthly_budget_usd: float | None
    production_variant: str = "baseline"
    runs_per_week: float = 1.0


@dataclass(frozen=True)
class MonthSpend:
    """The budget cell and the typical month, two questions kept apart.

    ``month_to_date_usd``: recorded spend from the 1st of the week's month to the end of
    the week (every variant, at each run's frozen price). ``month_usd``: the figure the
    budget word is about: this month's expected bill at its end (spend plus the rest,
    app.analytics.month) for the current month, the recorded spend for a past one.
    ``p_over_budget``: this month's P(bill > budget) (None for a past month or without a
    budget). ``expected_bill_usd``: a typical month at the current cadence from the
    production variant (the overview's figure; None without runs of that variant)."""

    month_to_date_usd: float = 0.0
    expected_bill_usd: float | None = None
    # The budget word of month_usd: this month's status (the one test, the same word as
    # every page) or, for a past month, over or within by what was recorded. None
    # without a budget.
    status: str | None = None
    month_usd: float | None = None
    p_over_budget: float | None = None


@dataclass(frozen=True)
class ReviewLine:
    """One pipeline's week (or, with ``pipeline`` None, the totals of all lines)."""

    pipeline: PipelineInfo | None
    this: WeekSummary
    previous: WeekSummary
    monthly_budget_usd: float | None
    month: MonthSpend = MonthSpend()

    @property
    def badput_usd(self) -> float:
        return sum(self.this.usd_by_cause.get(c, 0.0) for c in BADPUT_CAUSES)

    @property
    def goodput_change_points(self) -> float | None:
        a, b = self.this.goodput.overall, self.previous.goodput.overall
        return None if a is None or b is None else 100.0 * (a - b)

    @property
    def spend_change_usd(self) -> float:
        return self.this.cost_usd - self.previous.cost_usd

    @property
    def over_budget_usd(self) -> float | None:
        """The month's figure (the one its word is about) minus the budget: positive =
        above the budget, as every signed money column; None without either."""
        figure, budget = self.month.month_usd, self.monthly_budget_usd
        return None if figure is None or budget is None else figure - budget


def lines_of(
    pipelines: Sequence[PipelineInfo],
    weeks: Mapping[str, tuple[WeekSummary, WeekSummary]],
    months: Mapping[str, MonthSpend] | None = None,
) -> list[ReviewLine]:
    """One line per pipeline from its (week before, week) summaries (by name), largest
    badput in dollars first: the pipelines where the week's waste cost most come first,
    then by spend, then by name so the order is stable."""
    lines = []
    for p in pipelines:
        last_week, this_week = weeks[p.name]
        month = (months or {}).get(p.name, MonthSpend())
        lines.append(ReviewLine(p, this_week, last_week, p.monthly_budget_usd, month))
    return sorted(lines, key=_impact)


def _impact(line: ReviewLine) -> tuple[float, float, str]:
    return (-line.badput_usd, -line.this.cost_usd, line.pipeline.name if line.pipeline else "")


def total_of(
    last_week: WeekSummary,
    this_week: WeekSummary,
    months: Iterable[MonthSpend],
    budgets: Sequence[float | None] | None = None,
) -> ReviewLine:
    """All the pipelines together, from their summed (week before, week): sums of
    GPU-hours, dollars and goodput terms (so the total goodput is GPU-hour weighted, not a
    mean of the pipelines' goodputs), month to date and typical-month expected bills (of
    the pipelines that have one). The budget compared is the sum of the budgets of the
    budgeted lines, against the sum of their months' figures (``budgets``: a budget per
    line, None when unset); unbudgeted lines stay out of that comparison. Check: budgets
    $1,400 and none, months $1,128 and $300: $1,128 against $1,400."""
    spends = list(months)
    pairs = list(zip(spends, budgets if budgets is not None else [None] * len(spends), strict=True))
    typical = [m.expected_bill_usd for m in spends if m.expected_bill_usd is not None]
    compared = [(m, b) for m, b in pairs if b is not None and m.month_usd is not None]
    month = MonthSpend(
        sum(m.month_to_date_usd for m in spends),
        sum(typical) if typical else None,
        month_usd=sum(m.month_usd or 0.0 for m, _ in compared) if compared else None,
    )
    budget = sum(b for _, b in compared) if compared else None
    return ReviewLine(None, this_week, last_week, budget, month)


EXPORT_FIELDS = (
    "week",
    "pipeline",
    "display_name",
    "owner",
    "runs",
    "gpu_hours",
    "spend_usd",
    "spend_change_usd",
    "goodput",
    "goodput_previous",
    "goodput_change_points",
    *(f"{c}_gpu_hours" for c in BADPUT_CAUSES),
    *(f"{c}_usd" for c in BADPUT_CAUSES),
    "badput_usd",
    "month_to_date_usd",
    "month_usd",
    "monthly_budget_usd",
    "over_budget_usd",
    "p_over_budget",
    "budget_status",
    "expected_bill_usd",
)
EXPORT_CONVENTIONS = (
    "Money columns are US dollars. Amounts (spend, waste, month_to_date_usd, month_usd, "
    "monthly_budget_usd, expected_bill_usd) are never negative. Differences are the first "
    "figure minus the second, positive = more: spend_change_usd = this week - the week "
    "before; over_budget_usd = month_usd - monthly_budget_usd (positive = above the "
    "budget). month_usd is the figure budget_status is about: this month's expected bill "
    "at its end (the current month) or the recorded spend (a past month), with "
    "p_over_budget its chance of ending over. expected_bill_usd answers the other "
    "question: a typical month at the current cadence. The TOTAL row compares the "
    "budgeted pipelines' month_usd with the sum of their budgets."
)
"""How the export's columns are signed, stated once: the JSON carries it and the docs
(docs/dashboard.md) quote it."""


def week_in_one_line(line: ReviewLine, previous_week: str) -> str:
    """The week in one sentence, as the review page says it and the weekly digest sends
    it. Example: 12 runs at $280 ($3,360), 10 the week before ($2,800), goodput 0.41
    then 0.39, badput $1,980: "12 runs cost $3,360 (+$560 on 2026-W47); goodput 41.0%
    (+2.0 points); $1,980 paid for GPU time that did no training." """
    this = line.this
    text = f"{this.runs} runs cost {_usd(this.cost_usd)}"
    if line.previous.runs:
        text += f" ({_signed_usd(line.spend_change_usd)} on {previous_week})"
    overall = this.goodput.overall
    text += "; goodput " + ("–" if overall is None else f"{100 * overall:.1f}%")
    if line.goodput_change_points is not None:
        text += f" ({line.goodput_change_points:+.1f} points)"
    return text + f"; {_usd(line.badput_usd)} paid for GPU time that did no training."


def _usd(value: float) -> str:
    return f"${value:,.0f}"


def _signed_usd(value: float) -> str:
    """``12.4`` -> ``+$12``, ``-80`` -> ``−$80``, ``0`` -> ``$0`` (the page's format)."""
    sign = "+" if value > 0.5 else "−" if value < -0.5 else ""
    return f"{sign}${abs(value):,.0f}"


def _rounded(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def export_row(line: ReviewLine, monday: date) -> dict[str, Any]:
    """One line as the CSV/JSON export has it: plain numbers, GPU-hours to 0.01, dollars
    to the cent, goodput as a fraction to 4 places."""
    p = line.pipeline
    this = line.this
    row: dict[str, Any] = {
        "week": iso_week(monday),
        "pipeline": p.name if p else "TOTAL",
        "display_name": p.display_name if p else "All pipelines",
        "owner": p.owner if p else "",
        "runs": this.runs,
        "gpu_hours": round(this.gpu_hours, 2),
        "spend_usd": round(this.cost_usd, 2),
        "spend_change_usd": round(line.spend_change_usd, 2),
        "goodput": _rounded(this.goodput.overall, 4),
        "goodput_previous": _rounded(line.previous.goodput.overall, 4),
        "goodput_change_points": _rounded(line.goodput_change_points, 2),
    }
    for c in BADPUT_CAUSES:
        row[f"{c}_gpu_hours"] = round(this.gpu_hours_by_cause.get(c, 0.0), 2)
    for c in BADPUT_CAUSES:
        row[f"{c}_usd"] = round(this.usd_by_cause.get(c, 0.0), 2)
    row["badput_usd"] = round(line.badput_usd, 2)
    row["month_to_date_usd"] = round(line.month.month_to_date_usd, 2)
    row["month_usd"] = _rounded(line.month.month_usd, 2)
    row["monthly_budget_usd"] = line.monthly_budget_usd
    row["over_budget_usd"] = _rounded(line.over_budget_usd, 2)
    row["p_over_budget"] = _rounded(line.month.p_over_budget, 4)
    row["budget_status"] = line.month.status
    row["expected_bill_usd"] = _rounded(line.month.expected_bill_usd, 2)
    return row
