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

from app.planning.goodput import EMPTY_TOTALS, GoodputTotals
from app.planning.weekly import (
    BADPUT_CAUSES,
    WeekSummary,
    WeekTotals,
    fill_weeks,
    iso_week,
)

TREND_WEEKS = 12
CAUSE_LABELS = {
    "data_stall": "Data stalls",
    "checkpoint": "Checkpoint writes",
    "failure": "Failures",
    "other_idle": "Other idle",
}


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


def add_totals(rows: Iterable[WeekTotals], monday: date) -> WeekTotals:
    """The sum of several pipelines' sums for one week (goodput stays a ratio of sums)."""
    goodput: GoodputTotals = EMPTY_TOTALS
    cost = 0.0
    hours: dict[str, float] = {}
    usd: dict[str, float] = {}
    for row in rows:
        goodput = goodput + row.goodput
        cost += row.cost_usd
        for cause, value in row.gpu_hours_by_cause.items():
            hours[cause] = hours.get(cause, 0.0) + value
        for cause, value in row.usd_by_cause.items():
            usd[cause] = usd.get(cause, 0.0) + value
    return WeekTotals(monday, goodput, cost, hours, usd)


def _week(rows: Sequence[WeekTotals], monday: date) -> WeekTotals:
    return add_totals((r for r in rows if r.week_start == monday), monday)


def review_lines(
    pipelines: Sequence[PipelineInfo],
    totals: Mapping[str, Sequence[WeekTotals]],
    monday: date,
    months: Mapping[str, MonthSpend] | None = None,
) -> list[ReviewLine]:
    """One line per pipeline (``totals`` is keyed by pipeline name), largest badput in
    dollars first: the pipelines where the week's waste cost most come first, then by
    spend, then by name so the order is stable."""
    previous = monday - timedelta(weeks=1)
    lines = []
    for p in pipelines:
        rows = totals.get(p.name, ())
        last_week, this_week = fill_weeks(
            [_week(rows, previous), _week(rows, monday)], previous, monday
        )
        month = (months or {}).get(p.name, MonthSpend())
        lines.append(ReviewLine(p, this_week, last_week, p.monthly_budget_usd, month))
    return sorted(lines, key=_impact)


def _impact(line: ReviewLine) -> tuple[float, float, str]:
    return (-line.badput_usd, -line.this.cost_usd, line.pipeline.name if line.pipeline else "")


def totals_line(
    totals: Mapping[str, Sequence[WeekTotals]],
    names: Iterable[str],
    monday: date,
    months: Mapping[str, MonthSpend] | None = None,
) -> ReviewLine:
    """All the named pipelines together: sums of GPU-hours, dollars and goodput terms
    (so the total goodput is GPU-hour weighted, not a mean of the pipelines' goodputs),
    month to date and projected months (of the pipelines that have a projection)."""
    previous = monday - timedelta(weeks=1)
    names = list(names)
    rows = [r for name in names for r in totals.get(name, ())]
    spends = [(months or {}).get(n, MonthSpend()) for n in names]
    projected = [m.projected_month_usd for m in spends if m.projected_month_usd is not None]
    month = MonthSpend(
        sum(m.month_to_date_usd for m in spends), sum(projected) if projected else None
    )
    last_week, this_week = fill_weeks(
        [_week(rows, previous), _week(rows, monday)], previous, monday
    )
    return ReviewLine(None, this_week, last_week, None, month)


def trend(
    totals: Mapping[str, Sequence[WeekTotals]], names: Iterable[str], monday: date
) -> list[WeekSummary]:
    """The ``TREND_WEEKS`` weeks ending with ``monday``'s, all named pipelines summed."""
    first = monday - timedelta(weeks=TREND_WEEKS - 1)
    rows = [r for name in names for r in totals.get(name, ())]
    mondays = sorted({r.week_start for r in rows if first <= r.week_start <= monday})
    return fill_weeks([_week(rows, m) for m in mondays], first, monday)


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
)


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
    return row
