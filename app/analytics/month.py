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

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Protocol

import numpy as np
from sqlalchemy.orm import Session

from app.analytics import costs, repository
from app.db import rollup_reads, running_reads
from app.db.engine import status_thresholds_of
from app.db.memo import kept
from app.planning.backtest import RecordRun, month_start, newest_start_before, window_before
from app.planning.bill import forecast_bill
from app.planning.budget_status import StatusThresholds
from app.planning.month_to_date import MonthToDate, month_to_date
from app.planning.running import (
    EXPERIMENT_DAYS,
    Running,
    days_left_in_month,
    elapsed_hours,
    experiments_expected,
    running_now,
    usual_hours,
)
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
class Extras:
    """What the month holds besides finished spend and the retrainings still to start:
    the attempts running now (started this month), how long the production variant's
    retrainings usually take (None: nothing runs), and each variant's finished attempts
    and their cost in the last EXPERIMENT_DAYS (the experiments' pace)."""

    running: tuple[running_reads.RunningRow, ...] = ()
    usual_hours: float | None = None
    recent: tuple[tuple[str, tuple[int, float]], ...] = ()

    def clock(self, now: datetime) -> datetime | None:
        """The moment the answer is computed at, part of its key: ``now`` while an
        attempt runs (its cost so far moves), the hour when only experiments are paced
        (their days left: recomputed hourly, not on every request), None otherwise."""
        if self.running:
            return now
        return now.replace(minute=0, second=0, microsecond=0) if self.recent else None


@dataclass(frozen=True)
class Inputs:
    """What one pipeline's month to date is computed from, besides the clock and its
    budget; ``key`` is (signature, production variant, price, month, day, window): every
    argument the inputs are read with (the day: the experiments' last 14 days move with it)."""

    key: tuple[int, str, float, date, date, int]
    spend: dict[str, float]
    costs: tuple[float, ...]
    newest_us: int  # the production variant's newest start, or NO_START
    extras: Extras = Extras()


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
    inputs = _inputs(session, pipelines, now, window)
    newest = np.fromiter((i.newest_us for i in inputs), dtype=np.int64, count=len(inputs))
    per_week = np.fromiter((p.runs_per_week for p in pipelines), dtype=float, count=len(inputs))
    none = newest == NO_START
    runs = remaining_counts(np.where(none, 0, newest), per_week, now)
    runs[none] = 0
    thresholds = status_thresholds_of(session)
    made: dict[int, tuple[object, MonthToDate]] = kept(session, "org_month_to_date")
    out = {}
    for p, i, n in zip(pipelines, inputs, runs.tolist(), strict=True):
        clock = i.extras.clock(now)
        key = (i.key, n, p.monthly_budget_usd, thresholds, clock)
        found = made.get(p.id)
        if found is None or found[0] != key:
            at = clock or now
            found = (key, _forecast(p, i.spend, i.costs, n, thresholds, i.extras, at))
            made[p.id] = found
        out[p.id] = found[1]
    return out


def _inputs(
    session: Session, pipelines: Sequence[Budgeted], now: datetime, window: int
) -> list[Inputs]:
    """Each pipeline's kept inputs, read again for those whose key moved (in the order
    of ``pipelines``). The signatures are read first, so inputs can only be newer than
    the signature they are filed under: the next request then reads them again. The
    day is in the key: the experiments' last 14 days move with it."""
    ids = None if len(pipelines) > ID_LIST_LIMIT else [p.id for p in pipelines]
    signatures = rollup_reads.signatures(session, ids)
    kept_inputs: dict[int, Inputs] = kept(session, "month_inputs")
    month, day = month_of(now), now.astimezone(UTC).date()

    def key(p: Budgeted) -> tuple[int, str, float, date, date, int]:
        return (signatures.get(p.id, 0), p.production_variant, p.price_per_gpu_hour, month,
                day, window)  # fmt: skip

    stale = [p for p in pipelines if (i := kept_inputs.get(p.id)) is None or i.key != key(p)]
    if stale:
        read = None if len(stale) > ID_LIST_LIMIT else [p.id for p in stale]
        spends = rollup_reads.month_spend_by_variant(session, month, read)
        starts = rollup_reads.newest_starts(session, read)
        windows = costs.windows(session, stale, window)
        extras = _extras(session, stale, read, now, window)
        for p in stale:
            started = starts.get(p.id, {}).get(p.production_variant)
            window_costs = windows.get(p.id, ())
            kept_inputs[p.id] = Inputs(
                key(p),
                spends.get(p.id, {}),
                window_costs,
                epoch_microseconds(started) if started and window_costs else NO_START,
                extras.get(p.id, Extras()),
            )
    return [kept_inputs[p.id] for p in pipelines]


def _extras(
    session: Session,
    pipelines: Sequence[Budgeted],
    ids: list[int] | None,
    now: datetime,
    window: int,
) -> dict[int, Extras]:
    """The running attempts and the recent experiments of these pipelines (``ids``:
    their ids, None for every pipeline), and for those running a production attempt how
    long its retrainings usually take (one read each: few pipelines run at once)."""
    first = datetime.combine(month_of(now), datetime.min.time(), tzinfo=UTC)
    # From the start of the day EXPERIMENT_DAYS ago: the same all day, so kept by the day.
    today = datetime.combine(now.astimezone(UTC).date(), datetime.min.time(), tzinfo=UTC)
    since = today - timedelta(days=EXPERIMENT_DAYS)
    lately = running_reads.running_and_recent(session, ids, first, since)
    running, recent = lately.running, lately.recent
    out = {}
    for p in pipelines:
        mine = running.get(p.id, ())
        usual = None
        if any(r.variant == p.production_variant for r in mine):
            hours = running_reads.recent_wall_clocks(session, p.id, p.production_variant, window)
            usual = usual_hours(hours)
        variants = tuple(sorted(recent.get(p.id, {}).items()))
        if mine or variants:
            out[p.id] = Extras(mine, usual, variants)
    return out


def _forecast(
    p: Budgeted,
    spend: dict[str, float],
    costs_: tuple[float, ...],
    runs: int,
    thresholds: StatusThresholds,
    extras: Extras,
    now: datetime,
) -> MonthToDate:
    """The month to date, with the attempts running now (a typical retraining is the
    window's mean cost) and the experiments' rest of the month."""
    forecast = forecast_bill(list(costs_) or [0.0], exactly(runs))
    typical = math.fsum(costs_) / len(costs_) if costs_ else 0.0
    attempts = [
        Running(r.variant, r.workers, elapsed_hours(r.started_at, now), r.price_per_gpu_hour)
        for r in extras.running
    ]
    running = running_now(attempts, p.production_variant, typical, extras.usual_hours)
    rest = experiments_expected(dict(extras.recent), p.production_variant, days_left_in_month(now))
    return month_to_date(
        spend, p.production_variant, forecast, p.monthly_budget_usd, thresholds,
        running=running, experiments_expected_usd=rest,
    )  # fmt: skip


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
    start (kept as :func:`months` keeps them), and the attempts running now and the
    recent experiments, read here (small indexed reads)."""
    cache: dict[int, tuple[object, MonthToDate]] = kept(session, "month_to_date")
    thresholds = status_thresholds_of(session)
    inputs = Inputs(
        (0, "", 0.0, month_of(now), now.date(), RUN_WINDOW),
        spend,
        costs_,
        0,
        _page_extras(session, pipeline, now),
    )
    return _month_to_date(pipeline, inputs, started, now, thresholds, cache)


def _page_extras(session: Session, p: Budgeted, now: datetime) -> Extras:
    """:func:`_extras` of one pipeline, kept between requests under its signature (read
    with its variant statistics, already read by the page), production variant and day."""
    cache: dict[int, tuple[object, Extras]] = kept(session, "month_extras")
    key = (repository.variants(session, p.id)[1], p.production_variant, now.astimezone(UTC).date())
    found = cache.get(p.id)
    if found is None or found[0] != key:
        extras = _extras(session, [p], [p.id], now, RUN_WINDOW).get(p.id, Extras())
        found = cache[p.id] = (key, extras)
    return found[1]


def _month_to_date(
    p: Budgeted,
    i: Inputs,
    started: datetime | None,
    now: datetime,
    thresholds: StatusThresholds,
    cache: dict[int, tuple[object, MonthToDate]],
) -> MonthToDate:
    runs = remaining_runs(started, p.runs_per_week, now).counts[0] if i.costs and started else 0
    clock = i.extras.clock(now)
    key = (month_of(now), tuple(sorted(i.spend.items())), i.costs, runs, p.monthly_budget_usd,
           p.production_variant, thresholds, i.extras, clock)  # fmt: skip
    found = cache.get(p.id)
    if found is None or found[0] != key:
        found = (key, _forecast(p, i.spend, i.costs, runs, thresholds, i.extras, clock or now))
        cache[p.id] = found
    return found[1]


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
    nothing spent yet, the production variant's window and newest start as they were,
    the pipeline's cadence, price and budget as they are now. None: no planning run of
    the production variant had started."""
    at = month_start(month)
    costs_ = window_before(runs, pipeline.production_variant, at, window)
    started = newest_start_before(runs, pipeline.production_variant, at)
    if not costs_ or started is None:
        return None
    # At the month's first instant nothing runs yet and no experiment is paced: no extras.
    inputs = Inputs((0, "", 0.0, month, month, window), {}, costs_, 0)
    return _month_to_date(pipeline, inputs, started, at, thresholds, {})
