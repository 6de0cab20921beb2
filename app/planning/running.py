"""What attempts still running and experiments still running add to this month
(docs/methodology.md §5.4, "This month"). Pure: no I/O.

- An attempt reported at its start (``outcome: "running"``) has cost ``W x elapsed x
  price`` so far: that is in the spend to date. In the month's end it counts a whole
  typical retraining, never less than it has cost already. One running more than
  :data:`OVERDUE_FACTOR` times the usual retraining wall clock is flagged.
- A variant other than production that ran in the last :data:`EXPERIMENT_DAYS` days
  continues at its observed pace (its runs in those days, their mean cost) until the
  month ends.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from app.planning.model import PlanningError

OVERDUE_FACTOR = 2.0  # flagged past twice the usual (median) retraining wall clock
EXPERIMENT_DAYS = 14.0


@dataclass(frozen=True)
class Running:
    """One attempt still running: its variant, workers, hours since its start and the
    price frozen on it at its start."""

    variant: str
    workers: int
    elapsed_hours: float
    price_per_gpu_hour: float

    @property
    def so_far_usd(self) -> float:
        return self.workers * max(self.elapsed_hours, 0.0) * self.price_per_gpu_hour


@dataclass(frozen=True)
class RunningNow:
    """The running attempts of one pipeline: what they have cost so far (all of them,
    and the production variant's part), what they count in the month's end, and the
    warnings for those running far past their usual length."""

    so_far_usd: float = 0.0
    production_so_far_usd: float = 0.0
    counted_usd: float = 0.0
    count: int = 0
    warnings: tuple[str, ...] = ()


def running_now(
    attempts: Sequence[Running],
    production_variant: str,
    typical_usd: float,
    usual_hours: float | None,
) -> RunningNow:
    """The running attempts' cost so far and what they count by the month's end.

    A production attempt counts ``max(typical retraining, cost so far)``; an attempt of
    another variant counts what it has cost so far (the experiments' pace, below,
    forecasts the rest of their month).

    Check (the issue's Nov 16 month): 8 workers, started 6 h ago, at $1.5714/GPU-h, a typical
    retraining 8 x 14 h x $1.5714 = $176.00: so far 8 x 6 x 1.5714 = $75.43, counted
    $176.00. Started 40 h ago with retrainings usually taking 14 h (> 2 x 14 = 28 h):
    flagged "running 40 h; retrainings usually take 14 h", counted 8 x 40 x 1.5714 =
    $502.85 (more than a typical one).
    """
    if not (math.isfinite(typical_usd) and typical_usd >= 0):
        raise PlanningError("a typical retraining's cost must be finite and >= 0")
    so_far = production = counted = 0.0
    warnings = []
    for a in attempts:
        cost = a.so_far_usd
        so_far += cost
        if a.variant != production_variant:
            counted += cost
            continue
        production += cost
        counted += max(typical_usd, cost)
        if usual_hours and a.elapsed_hours > OVERDUE_FACTOR * usual_hours:
            warnings.append(
                f"A retraining has been running {a.elapsed_hours:.0f} h; retrainings usually "
                f"take {usual_hours:.0f} h: check that it is not stuck (it counts "
                f"${cost:,.2f} so far)."
            )
    return RunningNow(so_far, production, counted, len(attempts), tuple(warnings))


def experiments_expected(
    recent: Mapping[str, tuple[int, float]],
    production_variant: str,
    days_left: float,
    window_days: float = EXPERIMENT_DAYS,
) -> float:
    """The rest of the month of the variants other than production that ran in the last
    ``window_days``: ``recent`` is {variant: (finished runs started in those days, their
    total cost)}. Each goes on at its pace, runs / window_days per day, at its mean cost:
    expected = runs / window_days x days_left x (cost / runs) = cost x days_left / window_days.

    Check: a candidate with 2 runs in 14 days costing $200 in all, 15 days left:
    2 / 14 x 15 = 2.143 runs at $100 = $214.29. Production's own runs add nothing here.
    """
    if days_left < 0 or window_days <= 0:
        raise PlanningError("days left must be >= 0 and the window > 0")
    total = 0.0
    for variant, (runs, cost) in recent.items():
        if variant == production_variant or runs <= 0:
            continue
        if not (math.isfinite(cost) and cost >= 0):
            raise PlanningError(f"the cost of variant {variant!r} must be finite and >= 0")
        total += cost * days_left / window_days
    return total


def usual_hours(wall_clocks: Sequence[float]) -> float | None:
    """How long a retraining usually takes: the median of recent wall clocks (hours);
    None without any. Check: 12, 14, 15 h -> 14 h."""
    return float(statistics.median(wall_clocks)) if wall_clocks else None


def elapsed_hours(started_at: datetime, now: datetime) -> float:
    """Hours since a start, never negative (a start a little ahead of the clock)."""
    return max((now - started_at).total_seconds() / 3600.0, 0.0)


def days_left_in_month(now: datetime) -> float:
    """Days from ``now`` to the first instant of the next UTC month.
    Check: Nov 16 00:00 UTC -> 15 days (Nov has 30); Dec 31 12:00 -> 0.5."""
    now = now.astimezone(UTC)
    first = datetime(now.year + (now.month == 12), now.month % 12 + 1, 1, tzinfo=UTC)
    return (first - now).total_seconds() / 86400.0
