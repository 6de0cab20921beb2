"""How many retrainings a month holds (docs/methodology.md §5.2).

Two questions, two answers:

- the *typical* month at k runs a week holds m = k x weeks_per_month runs; a month holds
  a whole number of them, so N = ceil(m) with probability m - floor(m), else floor(m)
  (E[N] = m exactly; the 4-week convention gives exactly 4k, a whole number when k is);
- a *named* calendar month holds the runs its schedule starts in it: every 7/k days after
  the newest retraining, or on named weekdays when a schedule setting gives them.

Both are a :class:`RunsInMonth`, a small discrete distribution of run counts that the bill
forecast (app/planning/bill.py) draws N from.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

import numpy as np

from app.planning.model import PlanningError

# The month convention, named once: "calendar" months have 52/12 = 4.333 weeks (the
# default), "four_week" months have 4 (the month many planning spreadsheets use).
MonthConvention = Literal["calendar", "four_week"]
CALENDAR: MonthConvention = "calendar"
WEEKS_PER_MONTH: dict[str, float] = {"calendar": 52 / 12, "four_week": 4.0}


def weeks_per_month(convention: str = CALENDAR) -> float:
    """52/12 for "calendar", 4 for "four_week"; PlanningError otherwise."""
    try:
        return WEEKS_PER_MONTH[convention]
    except KeyError:
        raise PlanningError(
            f"unknown month convention {convention!r}; use one of {sorted(WEEKS_PER_MONTH)}"
        ) from None


def runs_per_month(runs_per_week: float, convention: str = CALENDAR) -> float:
    """Runs per month = k * weeks_per_month (methodology.md §5): 1/week -> 4.333 or 4."""
    if not (math.isfinite(runs_per_week) and runs_per_week >= 0):
        raise PlanningError("runs per week must be >= 0")
    return runs_per_week * weeks_per_month(convention)


@dataclass(frozen=True)
class RunsInMonth:
    """A distribution of run counts: ``counts[i]`` with probability ``probabilities[i]``."""

    counts: tuple[int, ...]
    probabilities: tuple[float, ...]

    def __post_init__(self) -> None:
        if not self.counts or len(self.counts) != len(self.probabilities):
            raise PlanningError("runs in month: give one probability per count")
        if any(c < 0 for c in self.counts) or any(p < 0 for p in self.probabilities):
            raise PlanningError("runs in month: counts and probabilities must be >= 0")
        if not math.isclose(math.fsum(self.probabilities), 1.0, abs_tol=1e-9):
            raise PlanningError("runs in month: probabilities must sum to 1")

    @property
    def mean(self) -> float:
        """E[N]: the runs in month that the expected bill multiplies."""
        return math.fsum(c * p for c, p in zip(self.counts, self.probabilities, strict=True))

    def describe(self) -> str:
        """'9 runs (p 2/3) or 8 (p 1/3)' style wording for the working."""
        if len(self.counts) == 1:
            return f"{self.counts[0]} runs"
        parts = [f"{c} (p {p:.3g})" for c, p in zip(self.counts, self.probabilities, strict=True)]
        return "N = " + " or ".join(parts) + f", mean {self.mean:.4g}"


def exactly(count: int) -> RunsInMonth:
    """A month known to hold ``count`` runs."""
    return RunsInMonth((count,), (1.0,))


def typical_month_runs(runs_per_week: float, convention: str = CALENDAR) -> RunsInMonth:
    """N for the typical month: m = k x weeks_per_month; ceil(m) w.p. m - floor(m).

    Check: 2 runs/week, calendar months: m = 2 x 52/12 = 8.667, so N = 9 with
    probability 0.667 and 8 with 0.333 (mean 8.667). Four-week months: N = 8 exactly.
    """
    m = runs_per_month(runs_per_week, convention)
    low = math.floor(m)
    frac = m - low
    if frac < 1e-9:
        return exactly(int(low))
    if frac > 1 - 1e-9:
        return exactly(int(low) + 1)
    return RunsInMonth((low + 1, low), (frac, 1.0 - frac))


def month_bounds(year: int, month: int) -> tuple[datetime, datetime]:
    """[start, end) of a UTC calendar month."""
    if not 1 <= month <= 12:
        raise PlanningError(f"month must be 1..12, got {month}")
    start = datetime(year, month, 1, tzinfo=UTC)
    end = datetime(year + month // 12, month % 12 + 1, 1, tzinfo=UTC)
    return start, end


def _utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def scheduled_starts(
    newest: datetime,
    runs_per_week: float,
    start: datetime,
    end: datetime,
    weekdays: Collection[int] | None = None,
) -> int:
    """Schedule starts in [start, end) after the newest retraining ``newest``.

    Every 7/k days: starts t_j = newest + j x 7/k days, j >= 1. With ``weekdays`` (0 =
    Monday ... 6 = Sunday): one start on each such date, at the newest retraining's time
    of day, later than ``newest``. Naive datetimes are read as UTC.
    Check: newest Sat 2026-11-28 00:00, 2 runs/week (every 3.5 days), December 2026:
    starts Dec 1 12:00, Dec 5 00:00, ..., Dec 29 12:00: 9 starts.
    """
    newest, start, end = _utc(newest), _utc(start), _utc(end)
    if not (math.isfinite(runs_per_week) and runs_per_week >= 0):
        raise PlanningError("runs per week must be >= 0")
    if end <= start or runs_per_week == 0:
        return 0
    if weekdays is not None:
        return _weekday_starts(newest, start, end, weekdays)
    step = 7.0 * 86400.0 / runs_per_week
    first = max(1, math.ceil((start - newest).total_seconds() / step - 1e-9))
    last = math.ceil((end - newest).total_seconds() / step - 1e-9) - 1
    return max(0, last - first + 1)


def _weekday_starts(
    newest: datetime, start: datetime, end: datetime, weekdays: Collection[int]
) -> int:
    if any(not 0 <= d <= 6 for d in weekdays):
        raise PlanningError("weekdays must be 0 (Monday) .. 6 (Sunday)")
    day = datetime.combine(start.date(), newest.timetz())
    count = 0
    while day < end:
        if day.weekday() in weekdays and day > newest and day >= start:
            count += 1
        day += timedelta(days=1)
    return count


# Not called by the app: the library call docs/bill.md documents (tests/planning check it).
def calendar_month_runs(
    newest: datetime,
    runs_per_week: float,
    year: int,
    month: int,
    weekdays: Collection[int] | None = None,
) -> RunsInMonth:
    """The runs the schedule starts in a named UTC calendar month (a known count)."""
    start, end = month_bounds(year, month)
    return exactly(scheduled_starts(newest, runs_per_week, start, end, weekdays))


def remaining_runs(
    newest: datetime,
    runs_per_week: float,
    now: datetime,
    weekdays: Collection[int] | None = None,
) -> RunsInMonth:
    """The retrainings still to start between ``now`` and the end of now's UTC month.

    Starts the schedule placed before ``now`` that did not happen are not counted: the
    month's spend to date already shows what did start.
    """
    now = _utc(now)
    _, end = month_bounds(now.year, now.month)
    return exactly(scheduled_starts(newest, runs_per_week, now, end, weekdays))


def epoch_microseconds(value: datetime) -> int:
    """``value`` as whole microseconds since 1970-01-01 UTC (naive read as UTC): exact,
    so :func:`remaining_counts` subtracts without rounding."""
    delta = _utc(value) - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds


def remaining_counts(newest_us: np.ndarray, runs_per_week: np.ndarray, now: datetime) -> np.ndarray:
    """:func:`remaining_runs` (every 7/k days, no weekdays) of many schedules at once: the
    starts left between ``now`` and the end of its UTC month after each newest retraining
    (``newest_us``, :func:`epoch_microseconds`), as int64 counts.

    The same floating-point steps as :func:`scheduled_starts`, element by element
    (seconds = microseconds / 1e6, as ``timedelta.total_seconds`` divides), so each count
    equals the scalar one; a property test holds them equal. 5,000 schedules: 0.14 ms
    against 47 ms one by one (the org-wide month to date, every request).
    """
    now = _utc(now)
    _, end = month_bounds(now.year, now.month)
    newest = np.asarray(newest_us, dtype=np.int64)
    k = np.asarray(runs_per_week, dtype=np.float64)
    if not np.all(np.isfinite(k) & (k >= 0)):
        raise PlanningError("runs per week must be >= 0")
    out = np.zeros(newest.shape, dtype=np.int64)
    live = k > 0
    step = 7.0 * 86400.0 / k[live]
    since_newest = (epoch_microseconds(now) - newest[live]) / 1e6
    until_end = (epoch_microseconds(end) - newest[live]) / 1e6
    first = np.maximum(1, np.ceil(since_newest / step - 1e-9))
    last = np.ceil(until_end / step - 1e-9) - 1
    out[live] = np.maximum(0, last - first + 1).astype(np.int64)
    return out
