"""What a month's forecast would have been fed at the month's start (docs/methodology.md §16).

A backtest answers "what would the forecast of month M have said on its first day?" from
one read of the pipeline's attempts: for each month, only the attempts that had started
before it began. The window it draws from is built here as the database builds the
live one (``app.analytics.repository.recent_costs``): the variant's newest RUN_WINDOW
planning attempts (succeeded, utilization measured), each costing its GPU-hours (capped
at workers x hours x 1.01, hours at least the time its interruptions explain) at the
projection price (its own, else the pipeline's current one), plus the attempts of its
retraining that did not succeed (G x that price, uncapped, as the query sums them).
What the month then cost, its spend, is every attempt of every variant started in it at
the price frozen on it (``month_spend``), as this month's spend to date adds it up.

Pure: the attempts arrive as :class:`RecordRun` rows, sorted by start.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime


@dataclass(frozen=True)
class RecordRun:
    """One attempt as a backtest needs it.

    ``hours``: its wall clock (at least what its interruptions explain); ``price``: the
    projection price (its own, else the pipeline's current); ``billed_price``: the price
    frozen on it when stored (spend); ``planning``: succeeded with a utilization figure,
    so it may stand in a window.
    """

    started_at: datetime
    variant: str
    retraining_id: str
    succeeded: bool
    planning: bool
    workers: int
    hours: float
    gpu_hours: float
    price: float
    billed_price: float

    @property
    def window_usd(self) -> float:
        """Its cost in a window: min(G, W x hours x 1.01) x price."""
        return min(self.gpu_hours, self.workers * max(self.hours, 1e-9) * 1.01) * self.price

    @property
    def spend_usd(self) -> float:
        """What it was billed: G x the frozen price."""
        return self.gpu_hours * self.billed_price


def month_start(month: date) -> datetime:
    """The first instant (UTC) of the month that ``month`` falls in."""
    return datetime(month.year, month.month, 1, tzinfo=UTC)


def started_before(runs: Sequence[RecordRun], at: datetime) -> int:
    """How many of ``runs`` (sorted by start) started before ``at``."""
    return bisect_left([r.started_at for r in runs], at)


def series_before(
    runs: Sequence[RecordRun], variant: str, at: datetime, size: int
) -> tuple[tuple[float, float, datetime], ...]:
    """``variant``'s newest ``size`` planning attempts started before ``at``, oldest
    first, as a cost series: each retraining's (cost, the part paid for its attempts that
    did not succeed and had started before ``at``, start), what the forecast's model reads
    (app/planning/cost_series.py; the worked check: ``window_before`` in
    tests/fixtures/forecast_record.py)."""
    seen = runs[: started_before(runs, at)]
    failed: dict[str, float] = {}
    for r in seen:
        if not r.succeeded:
            failed[r.retraining_id] = failed.get(r.retraining_id, 0.0) + r.gpu_hours * r.price
    chosen = [r for r in seen if r.planning and r.variant == variant][-size:]
    extra = [failed.get(r.retraining_id, 0.0) for r in chosen]
    return tuple((r.window_usd + e, e, r.started_at) for r, e in zip(chosen, extra, strict=True))


def newest_start_before(runs: Sequence[RecordRun], variant: str, at: datetime) -> datetime | None:
    """The newest start of any attempt of ``variant`` before ``at`` (the schedule's
    anchor), None when there is none."""
    for r in reversed(runs[: started_before(runs, at)]):
        if r.variant == variant:
            return r.started_at
    return None


def month_spend(runs: Sequence[RecordRun]) -> dict[date, float]:
    """Every attempt's spend (G x frozen price) added up by the UTC month it started in.

    Check: $100 on Oct 31 23:00 UTC and $50 + $25 in November: {Oct: 100, Nov: 75}.
    """
    parts: dict[date, list[float]] = {}
    for r in runs:
        parts.setdefault(r.started_at.astimezone(UTC).date().replace(day=1), []).append(r.spend_usd)
    return {m: math.fsum(v) for m, v in parts.items()}
