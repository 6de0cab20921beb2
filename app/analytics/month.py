"""This month so far, for one pipeline or all of them (docs/methodology.md §5.4): what every
variant has spent since the 1st (UTC), plus the bill of the production variant's
retrainings still to start before the month ends, against the budget.

One function serves the projection API, the pipeline page, the portfolio, the review,
/metrics and the budget alert, so the status word is the same everywhere. Its inputs are
read for many pipelines at once: the month's spend by variant from the rollups, each
production variant's window of retraining costs (kept between requests by
``app.analytics.costs``) and newest start from ``run_variant``. The result is kept per
pipeline while those inputs, the budget and the retrainings still to start are the same,
so a warm org-wide read forecasts nothing again (a forecast is ~0.5 ms).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, date, datetime
from typing import Protocol

from sqlalchemy.orm import Session

from app.analytics import costs
from app.db import rollup_reads
from app.db.engine import status_thresholds_of
from app.db.memo import kept
from app.planning.bill import forecast_bill
from app.planning.budget_status import StatusThresholds
from app.planning.month_to_date import MonthToDate, month_to_date
from app.planning.scenario import RUN_WINDOW
from app.planning.schedule import exactly, remaining_runs

ID_LIST_LIMIT = costs.ID_LIST_LIMIT


class Budgeted(costs.Costed, Protocol):
    @property
    def monthly_budget_usd(self) -> float | None: ...


def month_of(now: datetime) -> date:
    return now.astimezone(UTC).date().replace(day=1)


def months(
    session: Session,
    pipelines: Sequence[Budgeted],
    now: datetime | None = None,
    window: int = RUN_WINDOW,
) -> dict[int, MonthToDate]:
    """Each pipeline's month to date at ``now`` (default: the clock), by pipeline id,
    worded with the thresholds of the session's database (CADENCE_STATUS_LIKELY_OVER,
    CADENCE_STATUS_AT_RISK)."""
    now = now or datetime.now(UTC)
    thresholds = status_thresholds_of(session)
    if not pipelines:
        return {}
    ids = None if len(pipelines) > ID_LIST_LIMIT else [p.id for p in pipelines]
    month = month_of(now)
    spends = rollup_reads.month_spend_by_variant(session, month, ids)
    newest = rollup_reads.newest_starts(session, ids)
    windows = costs.windows(session, pipelines, window)
    cache: dict[int, tuple[object, MonthToDate]] = kept(session, "month_to_date")
    return {
        p.id: _month_to_date(
            p,
            spends.get(p.id, {}),
            windows.get(p.id, ()),
            newest.get(p.id, {}).get(p.production_variant),
            now,
            thresholds,
            cache,
        )
        for p in pipelines
    }


def month_to_date_of(
    session: Session,
    pipeline: Budgeted,
    spend: dict[str, float],
    costs_: tuple[float, ...],
    started: datetime | None,
    now: datetime,
) -> MonthToDate:
    """One pipeline's month to date from what its page has read already: this month's
    spend by variant, its production variant's window of retraining costs and newest
    start (kept as :func:`months` keeps them)."""
    cache: dict[int, tuple[object, MonthToDate]] = kept(session, "month_to_date")
    thresholds = status_thresholds_of(session)
    return _month_to_date(pipeline, spend, costs_, started, now, thresholds, cache)


def _month_to_date(
    p: Budgeted,
    spend: dict[str, float],
    costs_: tuple[float, ...],
    started: datetime | None,
    now: datetime,
    thresholds: StatusThresholds,
    cache: dict[int, tuple[object, MonthToDate]],
) -> MonthToDate:
    month = month_of(now)
    runs = (
        remaining_runs(started, p.runs_per_week, now)
        if costs_ and started is not None
        else exactly(0)
    )
    key = (month, tuple(sorted(spend.items())), costs_, runs, p.monthly_budget_usd,
           p.production_variant, thresholds)  # fmt: skip
    found = cache.get(p.id)
    if found is None or found[0] != key:
        forecast = forecast_bill(list(costs_) or [0.0], runs)
        made = month_to_date(
            spend, p.production_variant, forecast, p.monthly_budget_usd, thresholds
        )
        found = cache[p.id] = (key, made)
    return found[1]
