"""Per-ISO-week summaries: goodput and badput totals, with empty weeks filled in.

The sums arrive from SQL (one GROUP BY week); this module turns them into the rows the
API and the dashboard show, and inserts weeks without runs so trends have no gaps.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, timedelta

from app.planning.goodput import EMPTY_TOTALS, Goodput, GoodputTotals, goodput_from_totals


def iso_week(day: date) -> str:
    """``date(2026, 11, 2)`` -> ``"2026-W45"`` (ISO 8601 week, Monday first)."""
    year, week, _ = day.isocalendar()
    return f"{year}-W{week:02d}"


def monday_of(moment: date | datetime) -> date:
    """The Monday of the ISO week holding ``moment``; a datetime is read in UTC.

    The one place the week boundary is spelled: SQL groups runs into the same weeks
    (``date_trunc('week', started_at AT TIME ZONE 'UTC')``).
    """
    day = moment.astimezone(UTC).date() if isinstance(moment, datetime) else moment
    return day - timedelta(days=day.weekday())


def last_complete_week(today: date) -> date:
    """The Monday of the last ISO week that has ended: on Monday 2026-11-30 that is
    2026-11-23 (week 48), never the week that has just started."""
    return monday_of(today) - timedelta(weeks=1)


def utc_midnight(day: date) -> datetime:
    """``date(2026, 11, 2)`` -> ``2026-11-02T00:00:00+00:00``: a week's start as a bound."""
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


def week_monday(label: str) -> date:
    """``"2026-W45"`` -> the Monday of that ISO week. Raises ValueError when malformed."""
    try:
        year_text, week_text = label.split("-W")
        return date.fromisocalendar(int(year_text), int(week_text), 1)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{label!r} is not an ISO week such as 2026-W45") from exc


@dataclass(frozen=True)
class WeekTotals:
    """SQL sums for one ISO week (``week_start`` is its Monday)."""

    week_start: date
    goodput: GoodputTotals
    cost_usd: float
    # GPU-hours and USD per cause: productive, idle and each of causes.BADPUT_CAUSES.
    gpu_hours_by_cause: dict[str, float] = field(default_factory=dict)
    usd_by_cause: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class WeekSummary:
    week: str
    week_start: date
    runs: int
    gpu_hours: float
    cost_usd: float
    goodput: Goodput
    gpu_hours_by_cause: dict[str, float]
    usd_by_cause: dict[str, float]
    mfu_gpu_hours: float = 0.0  # the GPU-hours of attempts that reported MFU


def summarise(t: WeekTotals) -> WeekSummary:
    return WeekSummary(
        week=iso_week(t.week_start),
        week_start=t.week_start,
        runs=t.goodput.runs,
        gpu_hours=t.goodput.gpu_hours,
        cost_usd=t.cost_usd,
        goodput=goodput_from_totals(t.goodput),
        gpu_hours_by_cause=dict(t.gpu_hours_by_cause),
        usd_by_cause=dict(t.usd_by_cause),
        mfu_gpu_hours=t.goodput.mfu_gpu_hours,
    )


def with_goodput_of(week: WeekSummary, totals: GoodputTotals) -> WeekSummary:
    """The week with the goodput (and MFU GPU-hours) of ``totals``: the production
    variant's, beside spend and badput of every variant."""
    return replace(week, goodput=goodput_from_totals(totals), mfu_gpu_hours=totals.mfu_gpu_hours)


def fill_weeks(rows: Iterable[WeekTotals], first: date, last: date) -> list[WeekSummary]:
    """One summary per ISO week from ``first``'s week to ``last``'s, oldest first.

    Weeks with no runs appear with zero totals and None goodput (an empty week has no
    goodput, rather than a goodput of 0).
    """
    by_week = {r.week_start: r for r in rows}
    monday = monday_of(first)
    end = monday_of(last)
    out = []
    while monday <= end:
        totals = by_week.get(monday) or WeekTotals(monday, EMPTY_TOTALS, 0.0)
        out.append(summarise(totals))
        monday += timedelta(days=7)
    return out
