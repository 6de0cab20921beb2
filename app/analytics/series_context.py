"""A page's cost series as a projection reads it (``SeriesContext``): its runs' days,
its abandoned retrainings, the latest declared change, the organisation's prior and
today's day number, where a typical month starts (``app.analytics.bill_now``)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, time

from app.analytics.month import PRICE_CHANGE
from app.analytics.month_running import day_of
from app.analytics.reads import RunReads, RunRow
from app.planning.cost_series import days_of
from app.planning.series_bill import SeriesContext


def series_context(runs: RunReads, variant: str, rows: Sequence[RunRow]) -> SeriesContext:
    """The window of ``variant`` (``rows``) as a cost series for a projection: its runs'
    days, its abandoned retrainings, the latest declared change, the organisation's
    prior (``runs.prior``), today."""
    abandoned = tuple((c, e, _day(t)) for c, e, t in runs.abandoned.get(variant, []))
    latest = runs.latest_change
    declared = ((_day(latest), PRICE_CHANGE),) if latest is not None else ()
    days = tuple(_day(r.started_at) for r in rows)
    return SeriesContext(days, abandoned, declared, runs.prior, today_day(datetime.now(UTC)))


def today_day(now: datetime) -> float:
    """The day number of 00:00 UTC on ``now``'s day: where a typical month starts, so
    today's expected bill is the same figure all day (``app.analytics.bill_now``)."""
    return _day(datetime.combine(day_of(now), time(), tzinfo=UTC))


def _day(moment: datetime) -> float:
    return float(days_of([moment])[0])
