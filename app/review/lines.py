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

from app.planning.weekly import (
    BADPUT_CAUSES,
    WeekSummary,
    iso_week,
)

CAUSE_LABELS = {
    "data_stall": "Data stalls",
    "checkpoint": "Checkpoint writes",
    "failure": "Failures",
    "other_idle": "Other idle",
    "failed": "Failed attempts",
}


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
    """The budget cell: recorded spend from the 1st of the week's month to the end of
    the week (every variant, at each run's frozen price), and the projected month at the
    current cadence from the production variant (the overview's figure; None without
    runs of that variant)."""

    month_to_date_usd: float = 0.0
    projected_month_usd: float | None = None
    # The budget word: this month's status (app.analytics.month, the same as every page)
    # when the week is in the current month; for a past month, over or within by what
    # was recorded. None without a budget.
    status: str | None = None


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
    def badput_gpu_hours(self) -> float:
        return sum(self.this.gpu_hours_by_cause.get(c, 0.0) for c in BADPUT_CAUSES)

    @property
    def goodput_change_points(self) -> float | None:
        a, b = self.this.goodput.overall, self.previous.goodput.overall
        return None if a is None or b is None else 100.0 * (a - b)

    @property
    def spend_change_usd(self) -> float:
        return self.this.cost_usd - self.previous.cost_usd

    @property
    def over_budget_usd(self) -> float | None:
        """Projected month minus budget (positive = over), None without either: the
        same comparison as the overview's card."""
        projected, budget = self.month.projected_month_usd, self.monthly_budget_usd
        return None if projected is None or budget is None else projected - budget


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
    last_week: WeekSummary, this_week: WeekSummary, months: Iterable[MonthSpend]
) -> ReviewLine:
    """All the pipelines together, from their summed (week before, week): sums of
    GPU-hours, dollars and goodput terms (so the total goodput is GPU-hour weighted, not a
    mean of the pipelines' goodputs), month to date and projected months (of the
    pipelines that have a projection)."""
    spends = list(months)
    projected = [m.projected_month_usd for m in spends if m.projected_month_usd is not None]
    month = MonthSpend(
        sum(m.month_to_date_usd for m in spends), sum(projected) if projected else None
    )
    return ReviewLine(None, this_week, last_week, None, month)


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
    "projected_month_usd",
    "monthly_budget_usd",
    "over_budget_usd",
    "budget_status",
)


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
    row["projected_month_usd"] = _rounded(line.month.projected_month_usd, 2)
    row["monthly_budget_usd"] = line.monthly_budget_usd
    row["over_budget_usd"] = _rounded(line.over_budget_usd, 2)
    row["budget_status"] = line.month.status
    return row
