"""This month so far, for one pipeline or all of them (docs/methodology.md §5.4): what every
variant has spent since the 1st (UTC), plus the bill of the production variant's
retrainings still to start before the month ends, against the budget.

One function serves the projection API, the pipeline page, the portfolio, the review,
/metrics and the budget alert, so the status word is the same everywhere.

Org-wide (:func:`months`), each process keeps every pipeline's inputs: the month's spend
by variant (the rollups), the production variant's window of retraining costs and its
newest start (``run_variant``), filed under what they depend on: the pipeline's
change count (``app.db.rollup_reads.change_counts``, moved by every write of one of its runs),
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
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime
from functools import partial
from typing import Protocol

import numpy as np
from sqlalchemy.orm import Session

from app.analytics import costs
from app.analytics.cost_models import cost_models, model_of
from app.analytics.month_running import (
    NO_EXTRAS,
    Extras,
    day_of,
    extras_of,
    page_extras,
    typical_cost,
)
from app.analytics.prior import columns, org_prior
from app.db import cost_reads, rollup_reads
from app.db.cost_reads import Series
from app.db.engine import status_thresholds_of
from app.db.kept import KeptMap
from app.db.memo import once_per_read_session
from app.planning.backtest import RecordRun, month_start, newest_start_before, series_before
from app.planning.bill import DEFAULT_DRAWS, BillForecast, forecast_bill
from app.planning.budget_status import StatusThresholds
from app.planning.cost_series import FIXED_PRIOR, CostModel, OrgPrior, days_of, fit
from app.planning.month_to_date import MonthToDate, month_to_date
from app.planning.scenario import RUN_WINDOW
from app.planning.schedule import (
    epoch_microseconds,
    exactly,
    remaining_counts,
    remaining_runs,
)
from app.planning.series_bill import forecast_series, schedule_days

ID_LIST_LIMIT = costs.ID_LIST_LIMIT
NO_START = np.iinfo(np.int64).min  # a pipeline with no runs: nothing still to start


# Org-wide: each pipeline's inputs by (id, month, day, window) while its change count,
# production variant and price are as read; its month to date by (id, window) while its
# inputs, retrainings still to start, budget, thresholds, prior and clock are.
KEPT_INPUTS: KeptMap[tuple[int, date, date, int], Inputs] = KeptMap("month_inputs")
KEPT_FORECASTS: KeptMap[tuple[int, int], MonthToDate] = KeptMap("org_month_to_date")
# One pipeline's month to date from what its page read, by id, while all of that is equal.
KEPT_PAGE_MONTH: KeptMap[int, MonthToDate] = KeptMap("month_to_date")


class Budgeted(costs.Costed, Protocol):
    @property
    def monthly_budget_usd(self) -> float | None: ...


def month_of(now: datetime) -> date:
    return now.astimezone(UTC).date().replace(day=1)


@dataclass(frozen=True)
class Inputs:
    """What one pipeline's month to date is computed from, besides the clock and its
    budget; ``key`` is (change count, production variant, price, month, day, window): every
    argument the inputs are read with (the day: the experiments' last 14 days move with it)."""

    key: tuple[int, str, float, date, date, int]
    spend: dict[str, float]
    costs: Series
    newest_us: int  # the production variant's newest start, or NO_START
    declared: tuple[tuple[float, str], ...] = ()  # (day, description) of declared changes
    extras: Extras = NO_EXTRAS  # attempts running now, the experiments' pace


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
    inputs = inputs_of(session, pipelines, now, window)
    newest = np.fromiter((i.newest_us for i in inputs), dtype=np.int64, count=len(inputs))
    per_week = np.fromiter((p.runs_per_week for p in pipelines), dtype=float, count=len(inputs))
    none = newest == NO_START
    runs = remaining_counts(np.where(none, 0, newest), per_week, now)
    runs[none] = 0
    thresholds = status_thresholds_of(session)
    prior = org_prior(session)
    hour = now.replace(minute=0, second=0, microsecond=0)  # once, not 5,000 times
    made: dict[tuple[int, int], tuple[object, Budgeted, Inputs, int, datetime | None]] = {}
    for p, i, n in zip(pipelines, inputs, runs.tolist(), strict=True):
        clock = i.extras.clock(now, hour)
        version = (i.key, n, p.monthly_budget_usd, thresholds, prior, clock)
        made[(p.id, window)] = (version, p, i, n, clock)

    def make(new: list[tuple[int, int]]) -> dict[tuple[int, int], MonthToDate]:
        wanted = {
            s: (made[s][2].costs, made[s][2].declared, prior) for s in new if made[s][2].costs
        }
        models = cost_models(session, wanted)
        out = {}
        for s in new:
            _, p, i, n, clock = made[s]
            out[s] = _forecast(p, i, n, clock or now, thresholds, prior, models.get(s))
        return out

    keys = ((slot, entry[0]) for slot, entry in made.items())
    return {pid: value for (pid, _), value in KEPT_FORECASTS.get_many(session, keys, make).items()}


def inputs_of(
    session: Session, pipelines: Sequence[Budgeted], now: datetime, window: int
) -> list[Inputs]:
    """Each pipeline's kept inputs, read again for those whose key moved (in the order
    of ``pipelines``). The change counts are read first, so inputs can only be newer than
    the change count they are filed under: the next request then reads them again. The
    day is in the key: the experiments' last 14 days move with it. Looked up once per
    read session (the month to date and today's bill both ask: 5,000 look-ups each)."""
    ids = tuple((p.id, p.production_variant, p.price_per_gpu_hour) for p in pipelines)
    key = ("month.inputs_of", ids, day_of(now), window)
    return once_per_read_session(session, key, partial(_inputs_of, session, pipelines, now, window))


def _inputs_of(
    session: Session, pipelines: Sequence[Budgeted], now: datetime, window: int
) -> list[Inputs]:
    month, day = month_of(now), day_of(now)
    ids = None if len(pipelines) > ID_LIST_LIMIT else [p.id for p in pipelines]
    change_counts = rollup_reads.change_counts(session, ids)

    def key(p: Budgeted) -> tuple[int, str, float, date, date, int]:
        return (
            change_counts.get(p.id, 0),
            p.production_variant,
            p.price_per_gpu_hour,
            month,
            day,
            window,
        )

    by_id = {p.id: p for p in pipelines}

    def read(slots: list[tuple[int, date, date, int]]) -> dict[tuple[int, date, date, int], Inputs]:
        stale = [by_id[pid] for pid, *_ in slots]
        fresh = _read_inputs(session, stale, now, window)
        return {(p.id, month, day, window): replace(fresh[p.id], key=key(p)) for p in stale}

    found = KEPT_INPUTS.get_many(
        session, (((p.id, month, day, window), key(p)[:3]) for p in pipelines), read
    )
    return [found[(p.id, month, day, window)] for p in pipelines]


def _read_inputs(
    session: Session, stale: Sequence[Budgeted], now: datetime, window: int
) -> dict[int, Inputs]:
    """The inputs of ``stale``, read in one statement of each kind (their ``key`` is set
    by the caller)."""
    month = month_of(now)
    read = None if len(stale) > ID_LIST_LIMIT else [p.id for p in stale]
    spends = rollup_reads.month_spend_by_variant(session, month, read)
    starts = rollup_reads.newest_starts(session, read)
    windows = costs.windows(session, stale, window)
    changes = declared_changes(session, read)
    extras = extras_of(session, stale, read, now, window)
    out = {}
    for p in stale:
        started = starts.get(p.id, {}).get(p.production_variant)
        window_costs = windows.get(p.id, ())
        out[p.id] = Inputs(
            (0, p.production_variant, p.price_per_gpu_hour, month, day_of(now), window),
            spends.get(p.id, {}),
            window_costs,
            epoch_microseconds(started) if started and window_costs else NO_START,
            declared_days(changes.get(p.id, ())),
            extras.get(p.id, NO_EXTRAS),
        )
    return out


def declared_changes(
    session: Session, pipeline_ids: list[int] | None
) -> dict[int, list[tuple[datetime, str]]]:
    """Change points by pipeline (declared notes and price changes): what
    ``app.pipelines.service.change_points`` lists, for many pipelines in one statement."""
    return cost_reads.declared_changes(session, pipeline_ids)


def declared_days(changes: Sequence[tuple[datetime, str]]) -> tuple[tuple[float, str], ...]:
    """Declared changes as the cost model reads them: (day, description)."""
    return tuple((float(days_of([at])[0]), PRICE_CHANGE) for at, _ in changes)


def borrows_spread(
    series: Series, declared: Sequence[tuple[float, str]], prior: OrgPrior = FIXED_PRIOR
) -> bool:
    """Whether the forecast of this series borrows spread from the organisation (and
    says "Only n retrainings to learn from"): whether a window it weighs has fewer than
    10 retrainings. Which windows it weighs follows from the prior too (its spread and
    its rate of changes), so the forecast's answer needs the forecast's prior; without
    one, the fixed prior's."""
    return bool(series) and fit(*columns(series), declared, prior).borrows


# The sentence names a change by its date only: the page reads the latest change's time
# in its variants statement, and every surface says the same words.
PRICE_CHANGE = ""


def _forecast(
    p: Budgeted,
    i: Inputs,
    runs: int,
    now: datetime,
    thresholds: StatusThresholds,
    prior: OrgPrior,
    model: CostModel | None = None,
) -> MonthToDate:
    """The month to date: the bill of the retrainings still to start, the attempts
    running now (a whole retraining is the window's mean cost) and the experiments' rest
    of the month."""
    forecast = bill_of(i.costs, i.declared, p.runs_per_week, runs, now, prior, model=model)
    running, rest = i.extras.parts(
        p.production_variant, typical_cost([c for c, _, _ in i.costs]), now
    )
    mtd = month_to_date(
        i.spend,
        p.production_variant,
        forecast,
        p.monthly_budget_usd,
        thresholds,
        running=running,
        experiments_expected_usd=rest,
    )
    return replace(mtd, working=mtd.working + forecast.sentences)


def bill_of(
    series: Series,
    declared: Sequence[tuple[float, str]],
    runs_per_week: float,
    runs: int,
    now: datetime,
    prior: OrgPrior,
    *,
    budget_usd: float | None = None,
    draws: int = DEFAULT_DRAWS,
    seed: int = 0,
    model: CostModel | None = None,
) -> BillForecast:
    """The bill of the ``runs`` retrainings still to start this month from the cost
    series (app/planning/cost_series.py: change points, trend, borrowed spread), each at
    its scheduled day: the one call every month-to-date figure goes through (and the
    family calibration test, tests/analytics/test_bill_family.py)."""
    if not series:
        return forecast_bill([0.0], exactly(runs))
    if model is None:  # else the kept fit of this series (app.analytics.cost_models)
        model = model_of(series, declared, prior)
    newest = float(days_of([series[-1][2]])[0])
    future = schedule_days(newest, runs_per_week, float(days_of([now])[0]), runs)
    return forecast_series(
        model, exactly(runs), future, budget_usd=budget_usd, draws=draws, seed=seed
    )


def month_to_date_of(
    session: Session,
    pipeline: Budgeted,
    spend: dict[str, float],
    series: Series,
    declared: datetime | None,
    started: datetime | None,
    now: datetime,
) -> MonthToDate:
    """One pipeline's month to date from what its page has read already (no statement
    more): this month's spend by variant, its production variant's cost series
    (``RunReads.series``, the same as :func:`months` reads), its latest declared change
    and its newest start, through the same forecast (:func:`bill_of`); and the attempts
    running now and the recent experiments (small indexed reads, kept by the day)."""
    thresholds = status_thresholds_of(session)
    changes = ((float(days_of([declared])[0]), PRICE_CHANGE),) if declared else ()
    extras = page_extras(session, pipeline, now)
    clock = extras.clock(now)
    prior = org_prior(session)
    args = (pipeline, spend, series, changes, started, now, thresholds, prior, extras, clock)
    # What the answer depends on: the clock only through the month and the retrainings
    # still to start (their days follow from the newest start).
    runs = remaining_runs(started, pipeline.runs_per_week, now).counts[0] if started else 0
    p = pipeline
    key = (
        p.monthly_budget_usd,
        p.runs_per_week,
        p.production_variant,
        p.price_per_gpu_hour,
        month_of(now),
        runs,
        spend,
        series,
        changes,
        started,
        thresholds,
        prior,
        extras,
        clock,
    )
    return KEPT_PAGE_MONTH.get(session, (pipeline.id, key), lambda: _one_month(*args))


def _one_month(
    pipeline: Budgeted,
    spend: dict[str, float],
    series: Series,
    changes: tuple[tuple[float, str], ...],
    started: datetime | None,
    now: datetime,
    thresholds: StatusThresholds,
    prior: OrgPrior,
    extras: Extras = NO_EXTRAS,
    at: datetime | None = None,
) -> MonthToDate:
    """The retrainings still to start are counted at ``now``; the rest is worked out at
    ``at`` (the extras' clock: the hour while only experiments are paced), as
    :func:`months` does."""
    newest = epoch_microseconds(started) if started and series else NO_START
    key = (
        0,
        pipeline.production_variant,
        pipeline.price_per_gpu_hour,
        month_of(now),
        day_of(now),
        0,
    )
    inputs = Inputs(key, spend, series, newest, changes, extras)
    runs = remaining_runs(started, pipeline.runs_per_week, now).counts[0] if started else 0
    return _forecast(pipeline, inputs, runs if series else 0, at or now, thresholds, prior)


def forecast_of_month(
    pipeline: Budgeted,
    runs: Sequence[RecordRun],
    month: date,
    thresholds: StatusThresholds,
    window: int = RUN_WINDOW,
) -> MonthToDate | None:
    """The forecast of calendar ``month`` made at its first instant from ``runs`` (every
    attempt, sorted by start; those started before the month are used): the app's one
    entry point for "the forecast of month M from these runs", the record's backtests
    (``app.analytics.record``). It is :func:`month_to_date_of` at the month's start:
    nothing spent yet, the production variant's cost series and newest start as they
    were, the pipeline's cadence, price and budget as they are now, the fixed prior (the
    organisation's as it was is not kept). None: no planning run of the production
    variant had started."""
    at = month_start(month)
    series = series_before(runs, pipeline.production_variant, at, window)
    started = newest_start_before(runs, pipeline.production_variant, at)
    if not series or started is None:
        return None
    # At the month's first instant nothing runs yet and no experiment is paced: no extras.
    return _one_month(pipeline, {}, series, (), started, at, thresholds, FIXED_PRIOR)
