"""The forecast's own record: each closed month's forecast scored against its bill
(docs/methodology.md §16).

A month's forecast (made at its start, stored or backtested) is scored when the month
closes: did the bill exceed the p90, did it fall inside the p10-p90 band, how far was the
expected bill from it, and was the status word on the right side of the budget. A
calibrated forecast has its p90 exceeded in about 1 month in 10 and 8 in 10 bills inside
its band. The summary and the sentences are what the pipeline page and the portfolio say.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime

# The words that say a month will end over its budget; within and at_risk say it will
# not (at_risk warns that P(over) is at least the risk tolerance, still under 50%).
OVER_WORDS = frozenset({"over", "likely_over"})


@dataclass(frozen=True)
class MonthForecast:
    """The forecast of one calendar month (``month``: its first day) made at
    ``forecast_at``; ``source`` is "recorded" (kept when made) or "backtest"."""

    month: date
    forecast_at: datetime
    expected_bill_usd: float
    bill_p10_usd: float
    bill_p90_usd: float
    p_over_budget: float | None
    budget_usd: float | None
    status: str | None
    source: str


@dataclass(frozen=True)
class ScoredMonth:
    """A closed month's forecast against its bill ``actual_usd``.

    ``error_pct`` = (expected - actual) / actual x 100 (None for a month that cost
    nothing); ``budget_exceeded`` and ``status_right`` are None without a budget.
    """

    forecast: MonthForecast
    actual_usd: float
    p90_exceeded: bool
    inside_band: bool
    error_pct: float | None
    budget_exceeded: bool | None
    status_right: bool | None


def score(forecast: MonthForecast, actual_usd: float) -> ScoredMonth:
    """Score one month.

    Check: expected $1,400, band $1,200-$1,650, budget $1,500, status "at_risk"; the
    month cost $1,700: p90 exceeded (1,700 > 1,650), outside the band, error (1,400 -
    1,700) / 1,700 = -17.65%, budget exceeded, and "at_risk" said it would not be: wrong.
    """
    exceeded = None
    right = None
    if forecast.budget_usd is not None:
        exceeded = actual_usd > forecast.budget_usd
        if forecast.status is not None:
            right = (forecast.status in OVER_WORDS) == exceeded
    error = None
    if actual_usd > 0:
        error = (forecast.expected_bill_usd - actual_usd) / actual_usd * 100.0
    return ScoredMonth(
        forecast=forecast,
        actual_usd=actual_usd,
        p90_exceeded=actual_usd > forecast.bill_p90_usd,
        inside_band=forecast.bill_p10_usd <= actual_usd <= forecast.bill_p90_usd,
        error_pct=error,
        budget_exceeded=exceeded,
        status_right=right,
    )


@dataclass(frozen=True)
class RecordSummary:
    """``months`` scored; how many had their p90 exceeded and their bill inside the band;
    ``mean_abs_error_pct`` over the ``error_months`` that cost something (None: none
    did); ``status_right`` of the ``budgeted_months``."""

    months: int
    p90_exceeded: int
    inside_band: int
    mean_abs_error_pct: float | None
    error_months: int
    budgeted_months: int
    status_right: int


def summarise(scored: Sequence[ScoredMonth]) -> RecordSummary:
    """Add up a record.

    Check: three months with errors +10%, -4% and none (a month that cost $0), one p90
    exceeded, two inside the band: months 3, p90 exceeded 1, inside 2, mean absolute
    error (10 + 4) / 2 = 7%.
    """
    errors = [abs(m.error_pct) for m in scored if m.error_pct is not None]
    budgeted = [m for m in scored if m.status_right is not None]
    return RecordSummary(
        months=len(scored),
        p90_exceeded=sum(m.p90_exceeded for m in scored),
        inside_band=sum(m.inside_band for m in scored),
        mean_abs_error_pct=math.fsum(errors) / len(errors) if errors else None,
        error_months=len(errors),
        budgeted_months=len(budgeted),
        status_right=sum(bool(m.status_right) for m in budgeted),
    )


def pooled(summaries: Iterable[RecordSummary]) -> RecordSummary:
    """Many pipelines' records as one (the organisation's): counts add; the mean absolute
    error is weighted by each record's ``error_months``.

    Check: (12 months, 1 exceeded, 10 inside, mean 6% over 12) and (8, 2, 5, 11% over 8):
    20 months, 3 exceeded, 15 inside, (6 x 12 + 11 x 8) / 20 = 8%.
    """
    items = list(summaries)
    weight = sum(s.error_months for s in items)
    total = math.fsum(
        s.mean_abs_error_pct * s.error_months for s in items if s.mean_abs_error_pct is not None
    )
    return RecordSummary(
        months=sum(s.months for s in items),
        p90_exceeded=sum(s.p90_exceeded for s in items),
        inside_band=sum(s.inside_band for s in items),
        mean_abs_error_pct=total / weight if weight else None,
        error_months=weight,
        budgeted_months=sum(s.budgeted_months for s in items),
        status_right=sum(s.status_right for s in items),
    )


def _months(n: int) -> str:
    return "month" if n == 1 else f"{n} months"


def record_sentence(s: RecordSummary) -> str:
    """The pipeline page's sentence, e.g. "The p90 was exceeded in 1 of the last 12
    months; 10 of 12 bills fell inside the forecast band; mean error 6%."."""
    if s.months == 0:
        return "No month has closed since the first forecast: the record starts when one does."
    bills = "bill" if s.months == 1 else "bills"
    error = (
        f"mean error {s.mean_abs_error_pct:.0f}%"
        if s.mean_abs_error_pct is not None
        else "no month cost anything, so no error to measure"
    )
    return (
        f"The p90 was exceeded in {s.p90_exceeded} of the last {_months(s.months)}; "
        f"{s.inside_band} of {s.months} {bills} fell inside the forecast band; {error}."
    )


def org_sentence(s: RecordSummary) -> str:
    """The portfolio's sentence, e.g. "The p90 was exceeded in 9% of 240 pipeline-months;
    80% of the bills fell inside the forecast band." (a calibrated forecast: about 10%
    and 80%)."""
    if s.months == 0:
        return "No pipeline has a closed month to score yet."
    exceeded = s.p90_exceeded / s.months
    inside = s.inside_band / s.months
    noun = "pipeline-month" if s.months == 1 else "pipeline-months"
    return (
        f"The p90 was exceeded in {exceeded:.0%} of {s.months:,} {noun}; "
        f"{inside:.0%} of the bills fell inside the forecast band."
    )
