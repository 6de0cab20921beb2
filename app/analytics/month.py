"""This month so far, for one pipeline or all of them (docs/methodology.md §5.4): what every
variant has spent since the 1st (UTC), plus the bill of the production variant's
retrainings still to start before the month ends, against the budget.

One function serves the projection API, the pipeline page, the portfolio, the review,
/metrics and the budget alert, so the status word is the same everywhere.

Org-wide (:func:`months`), each process keeps every pipeline's inputs: the month's spend
by variant (the rollups), the production variant's window of retraining costs and its
newest start (``run_variant``), filed under what they depend on: the pipeline's
signature (``app.db.rollup_reads.signatures``, moved by every write of one of its runs),
its production variant, its price, the month and the window of retrainings (every
argument they are read with). A request reads the change counters (one query per read
session, shared with ``org_weeks`` and ``costs``) and reads inputs again only for the
pipelines whose key moved. What time changes, the retrainings still
to start, is counted for all pipelines at once (``remaining_counts``), and a pipeline's
bill is forecast again (~0.5 ms) only when its inputs, count, budget or the thresholds
moved: a warm request forecasts nothing and reads nothing more.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Protocol

import numpy as np
from sqlalchemy.orm import Session

from app.analytics import costs
from app.db import rollup_reads
from app.db.engine import status_thresholds_of
from app.db.memo import kept
from app.planning.bill import forecast_bill
from app.planning.budget_status import StatusThresholds
from app.planning.month_to_date import MonthToDate, month_to_date
from app.planning.scenario import RUN_WINDOW
from app.planning.schedule import (
    epoch_microseconds,
    exactly,
    remaining_counts,
    remaining_runs,
)

ID_LIST_LIMIT = costs.ID_LIST_LIMIT
NO_START = np.iinfo(np.int64).min  # a pipeline with no runs: nothing still to start


class Budgeted(costs.Costed, Protocol):
    @property
    def monthly_budget_usd(self) -> float | None: ...


def month_of(now: datetime) -> date:
    return now.astimezone(UTC).date().replace(day=1)


@dataclass(frozen=True)
class Inputs:
    """What one pipeline's month to date is computed from, besides the clock and its
    budget; ``key`` is (signature, production variant, price, month, window): every
    argument the inputs are read with."""

    key: tuple[int, str, float, date, int]
    spend: dict[str, float]
    costs: tuple[float, ...]
    newest_us: int  # the production variant's newest start, or NO_START


def months(
    session: Session,
    pipelines: Sequence[Budgeted],
    now: datetime | None = None,
    window: int = RUN_WINDOW,
) -> dict[int, MonthToDate]:
    """Each pipeline's month to date at ``now`` (default: the clock), by pipeline id,
    worded with the thresholds of the session's database (CADENCE_STATUS_LIKELY_OVER,
    CADENCE_RISK_TOLERANCE, formerly CADENCE_STATUS_AT_RISK)."""
    now = now or datetime.now(UTC)
    if not pipelines:
        return {}
    inputs = _inputs(session, pipelines, month_of(now), window)
    newest = np.fromiter((i.newest_us for i in inputs), dtype=np.int64, count=len(inputs))
    per_week = np.fromiter((p.runs_per_week for p in pipelines), dtype=float, count=len(inputs))
    none = newest == NO_START
    runs = remaining_counts(np.where(none, 0, newest), per_week, now)
    runs[none] = 0
    thresholds = status_thresholds_of(session)
    made: dict[int, tuple[object, MonthToDate]] = kept(session, "org_month_to_date")
    out = {}
    for p, i, n in zip(pipelines, inputs, runs.tolist(), strict=True):
        key = (i.key, n, p.monthly_budget_usd, thresholds)
        found = made.get(p.id)
        if found is None or found[0] != key:
            found = made[p.id] = (key, _forecast(p, i.spend, i.costs, n, thresholds))
        out[p.id] = found[1]
    return out


def _inputs(
    session: Session, pipelines: Sequence[Budgeted], month: date, window: int
) -> list[Inputs]:
    """Each pipeline's kept inputs, read again for those whose key moved (in the order
    of ``pipelines``). The signatures are read first, so inputs can only be newer than
    the signature they are filed under: the next request then reads them again."""
    ids = None if len(pipelines) > ID_LIST_LIMIT else [p.id for p in pipelines]
    signatures = rollup_reads.signatures(session, ids)
    kept_inputs: dict[int, Inputs] = kept(session, "month_inputs")

    def key(p: Budgeted) -> tuple[int, str, float, date, int]:
        return (signatures.get(p.id, 0), p.production_variant, p.price_per_gpu_hour, month,
                window)  # fmt: skip

    stale = [p for p in pipelines if (i := kept_inputs.get(p.id)) is None or i.key != key(p)]
    if stale:
        read = None if len(stale) > ID_LIST_LIMIT else [p.id for p in stale]
        spends = rollup_reads.month_spend_by_variant(session, month, read)
        starts = rollup_reads.newest_starts(session, read)
        windows = costs.windows(session, stale, window)
        for p in stale:
            started = starts.get(p.id, {}).get(p.production_variant)
            window_costs = windows.get(p.id, ())
            kept_inputs[p.id] = Inputs(
                key(p),
                spends.get(p.id, {}),
                window_costs,
                epoch_microseconds(started) if started and window_costs else NO_START,
            )
    return [kept_inputs[p.id] for p in pipelines]


def _forecast(
    p: Budgeted,
    spend: dict[str, float],
    costs_: tuple[float, ...],
    runs: int,
    thresholds: StatusThresholds,
) -> MonthToDate:
    forecast = forecast_bill(list(costs_) or [0.0], exactly(runs))
    return month_to_date(spend, p.production_variant, forecast, p.monthly_budget_usd, thresholds)


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
    runs = remaining_runs(started, p.runs_per_week, now).counts[0] if costs_ and started else 0
    key = (month_of(now), tuple(sorted(spend.items())), costs_, runs, p.monthly_budget_usd,
           p.production_variant, thresholds)  # fmt: skip
    found = cache.get(p.id)
    if found is None or found[0] != key:
        found = cache[p.id] = (key, _forecast(p, spend, costs_, runs, thresholds))
    return found[1]
