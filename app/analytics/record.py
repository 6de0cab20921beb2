"""The forecast's own record (docs/methodology.md §16): each month's forecast, kept when
it is made, scored against the bill when the month closes.

Recording. The alert sweeper's thread (``app.alerts.sweeper``) calls
:func:`record_months` on every wake: the pipelines with runs and no stored forecast for
this calendar month, at most :data:`SWEEP_BATCH` a wake, get the month's forecast as of
now (the month to date every page shows: at the month's start, the whole month), read in
a session on the primary and stored in a short write session that skips a (pipeline,
month) already stored. The sweeper, not ingest: it already wakes every few seconds in
every serving process, so the first wake of a month records it whether or not a run
arrives, and the ingest path (one statement on PostgreSQL) stays as it is. Forecasting
happens outside the write transaction so SQLite's write lock is held only for inserts.

Reading. :func:`pipeline_record` scores up to :data:`MAX_MONTHS` closed months, each
when first asked for: the stored forecast where there is one, else a backtest
(``month.forecast_of_month``, fed the attempts that had started before the month, with
the pipeline's budget and cadence as they are now), against the month's spend. One read
of the stored rows and one of the attempts; the backtests are computed from them in
memory. The result is kept between requests (the kept map ``forecast_record``, its 64
most recently used: each holds its pipeline's attempts, ~5,000 for a daily pipeline with
retries over five years, ~1 MB) under the pipeline's change count, its settings, the month
and the status thresholds: closed months' stored rows no longer change, since the sweeper writes
only the current month and stops :data:`CLOSING` before it ends (a forecast made in a
month's last minutes is no forecast, and its short write then commits before the month
closes).
Reads never write.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import NamedTuple

from sqlalchemy.orm import Session

from app.analytics import month
from app.analytics.reads import change_count
from app.analytics.schemas import ForecastRecordOut, RecordMonthOut, RecordSummaryOut
from app.db import forecasts, rollup_reads
from app.db.engine import Database, status_thresholds_of
from app.db.kept import KeptMap
from app.db.models import Pipeline
from app.exceptions import Invalid
from app.pipelines.service import briefs, get_by_name
from app.planning.backtest import RecordRun, month_spend, month_start
from app.planning.budget_status import StatusThresholds
from app.planning.month_to_date import MonthToDate
from app.planning.record import (
    MonthForecast,
    RecordSummary,
    ScoredMonth,
    pooled,
    record_sentence,
    score,
    summarise,
)
from app.planning.schedule import month_bounds

MAX_MONTHS = 36  # the most closed months an answer holds (and what is kept)
SWEEP_BATCH = 200  # pipelines recorded per sweeper wake: bounded work, ~0.1 s
RUNS_BEFORE = 24  # months of attempts read before the oldest month a record shows
CLOSING = timedelta(minutes=10)  # no forecast is stored this close to its month's end
BACKTEST_NOTE = (
    "Months before the record began are backtested: the forecast the app would have made "
    "at the month's start from the runs that had started before it, with the pipeline's "
    "budget and cadence as they are now."
)


class BacktestSettings(NamedTuple):
    """What a backtest depends on besides the runs (a ``month.Budgeted``): the price
    (runs without their own), production variant, cadence and budget, as they are now."""

    id: int
    production_variant: str
    price_per_gpu_hour: float
    runs_per_week: float
    monthly_budget_usd: float | None


@dataclass(frozen=True)
class PipelineRecord:
    """What a pipeline's record is made from, read once: its attempts before the month in
    progress (sorted by start), its stored forecasts and each month's spend. Months are
    scored when first asked for (a backtest costs a bill forecast, ~0.5 ms) and kept in
    ``scored``; every value is a function of the fields above, so concurrent requests
    that fill it write the same values."""

    current: date  # the month in progress: the newest closed one is just before it
    settings: BacktestSettings
    thresholds: StatusThresholds
    runs: tuple[RecordRun, ...]
    stored: dict[date, MonthForecast]
    spend: dict[date, float]
    scored: dict[date, ScoredMonth | None] = field(default_factory=dict, compare=False)

    def last(self, months: int) -> tuple[ScoredMonth, ...]:
        """The scored months among the last ``months`` closed calendar months, newest
        first (a month with no forecast to score, before the first runs, is absent)."""
        out = []
        for first in closed_months(self.current, months):
            if first not in self.scored:
                self.scored[first] = self._score(first)
            if (found := self.scored[first]) is not None:
                out.append(found)
        return tuple(out)

    def _score(self, first: date) -> ScoredMonth | None:
        forecast = self.stored.get(first)
        if forecast is None:
            forecast = backtests(self.settings, self.runs, [first], self.thresholds).get(first)
        return None if forecast is None else score(forecast, self.spend.get(first, 0.0))


# A pipeline's record by (id, month) while its change count, settings and the thresholds are.
KEPT_RECORD: KeptMap[tuple[int, date], PipelineRecord] = KeptMap("forecast_record")


def closed_months(current: date, count: int) -> list[date]:
    """The ``count`` calendar months before ``current`` (first days), newest first."""
    out, y, m = [], current.year, current.month
    for _ in range(count):
        y, m = (y, m - 1) if m > 1 else (y - 1, 12)
        out.append(date(y, m, 1))
    return out


def as_forecast(mtd: MonthToDate, at: datetime, first: date, source: str) -> MonthForecast:
    """A month to date (as of ``at``) as the month's forecast."""
    return MonthForecast(
        month=first,
        forecast_at=at,
        expected_bill_usd=mtd.expected_end_of_month_usd,
        bill_p10_usd=mtd.end_of_month_p10_usd,
        bill_p90_usd=mtd.end_of_month_p90_usd,
        p_over_budget=mtd.p_over_budget,
        budget_usd=mtd.budget_usd,
        status=mtd.status.value if mtd.status is not None else None,
        source=source,
    )


def backtests(
    pipeline: month.Budgeted,
    runs: Sequence[RecordRun],
    months: Sequence[date],
    thresholds: StatusThresholds,
) -> dict[date, MonthForecast]:
    """Each month's forecast made at its start from the attempts before it (absent: no
    planning run of the production variant had started)."""
    out = {}
    for first in months:
        made = month.forecast_of_month(pipeline, runs, first, thresholds)
        if made is not None:
            out[first] = as_forecast(made, month_start(first), first, "backtest")
    return out


def pipeline_record(
    session: Session, pipeline: Pipeline, now: datetime | None = None
) -> PipelineRecord:
    """The pipeline's record at ``now`` (default: the clock), kept as the module says."""
    now = now or datetime.now(UTC)
    current = month.month_of(now)
    settings = BacktestSettings(
        pipeline.id,
        pipeline.production_variant,
        pipeline.price_per_gpu_hour,
        pipeline.runs_per_week,
        pipeline.monthly_budget_usd,
    )
    thresholds = status_thresholds_of(session)
    key = ((pipeline.id, current), (change_count(session, pipeline), settings, thresholds))
    return KEPT_RECORD.get(session, key, lambda: _read(session, settings, thresholds, current))


def _read(
    session: Session, settings: BacktestSettings, thresholds: StatusThresholds, current: date
) -> PipelineRecord:
    """One read of the stored rows and one of the attempts. The attempts go back
    RUNS_BEFORE months before the oldest month shown: a window of 20 retrainings spans
    less than that at any cadence of at least one a month."""
    since = closed_months(current, MAX_MONTHS)[-1]
    stored = forecasts.stored(session, [settings.id], since, current).get(settings.id, {})
    oldest = closed_months(since, RUNS_BEFORE)[-1]
    runs = forecasts.record_runs(session, settings.id, month_start(oldest), month_start(current))
    return PipelineRecord(current, settings, thresholds, tuple(runs), stored, month_spend(runs))


def record_months(db: Database, now: datetime | None = None, limit: int = SWEEP_BATCH) -> int:
    """Store this month's forecast, as of ``now``, for up to ``limit`` pipelines that have
    runs and none stored for the month; how many were stored (0: nothing left to do)."""
    now = now or datetime.now(UTC)
    current = month.month_of(now)
    if month_bounds(current.year, current.month)[1] - now < CLOSING:
        return 0
    with db.read_latest() as session:
        names = forecasts.unrecorded(session, current, limit)
        if not names:
            return 0
        listed = briefs(session, only=[name for _, name in names])
        made = month.months(session, listed, now)
    with db.write() as session:
        return sum(
            forecasts.insert_if_absent(session, pid, as_forecast(m, now, current, "recorded"))
            for pid, m in made.items()
        )


ORG_MONTHS = 12  # the portfolio's sentence: the last year


@dataclass(frozen=True)
class _Stored:
    """Every pipeline's stored forecasts of the org's closed months: (name, rows) by id."""

    rows: dict[int, tuple[str, dict[date, MonthForecast]]]


# The closed months' stored rows by the current month (they no longer change), and each
# pipeline's score by (current month, id) while its change count is as read.
KEPT_STORED: KeptMap[date, _Stored] = KeptMap("org_forecast_stored")
KEPT_SCORES: KeptMap[tuple[date, int], RecordSummary] = KeptMap("org_forecast_scores")


def org_record(
    session: Session, names: Collection[str], now: datetime | None = None
) -> RecordSummary:
    """The organisation's record over the last ORG_MONTHS closed months: every stored
    forecast of the pipelines ``names`` (the portfolio's), scored and pooled. Stored
    rows only: backtesting every pipeline would read every run of the organisation on
    a cold worker (seconds at 10 million runs), so months before the record began are
    not in it, and the portfolio says so.

    Kept between requests: the closed months' stored rows (they no longer change: the
    module says why), and each pipeline's score under its change count (read once per
    request, shared with the portfolio); a warm request reads nothing, and after a
    write only the spends of the pipelines whose change count moved are read again.
    """
    now = now or datetime.now(UTC)
    current = month.month_of(now)
    since = closed_months(current, ORG_MONTHS)[-1]
    change_counts = rollup_reads.change_counts(session)
    stored = KEPT_STORED.get(session, (current, None), lambda: _org_stored(session, current))

    def scored(slots: list[tuple[date, int]]) -> dict[tuple[date, int], RecordSummary]:
        spends = forecasts.month_spends(session, [pid for _, pid in slots], since, current)
        return {(m, pid): _scored(stored.rows[pid][1], spends.get(pid, {})) for m, pid in slots}

    keys = (((current, pid), change_counts.get(pid, 0)) for pid in stored.rows)
    scores = KEPT_SCORES.get_many(session, keys, scored)
    wanted = set(names)
    return pooled(s for (_, pid), s in scores.items() if stored.rows[pid][0] in wanted)


def _org_stored(session: Session, current: date) -> _Stored:
    since = closed_months(current, ORG_MONTHS)[-1]
    stored = forecasts.stored(session, None, since, current)
    named = forecasts.names(session, list(stored)) if stored else {}
    return _Stored({pid: (named[pid], rows) for pid, rows in stored.items() if pid in named})


def _scored(stored: dict[date, MonthForecast], spend: dict[date, float]) -> RecordSummary:
    return summarise([score(f, spend.get(m, 0.0)) for m, f in stored.items()])


def record_of(
    session: Session, name: str, months: int, now: datetime | None = None
) -> ForecastRecordOut:
    """``GET /api/v1/pipelines/{name}/forecast-record``: the last ``months`` closed
    months, newest first, and their summary."""
    if not 1 <= months <= MAX_MONTHS:
        reason = f"must be 1 to {MAX_MONTHS}"
        raise Invalid(f"months: {reason}", fields=[{"field": "months", "reason": reason}])
    pipeline = get_by_name(session, name)
    record = pipeline_record(session, pipeline, now)
    shown = record.last(months)
    summary = summarise(shown)
    return ForecastRecordOut(
        pipeline=pipeline.name,
        months_asked=months,
        months=[_month_out(m) for m in shown],
        summary=RecordSummaryOut(
            months=summary.months,
            p90_exceeded=summary.p90_exceeded,
            inside_band=summary.inside_band,
            mean_abs_error_pct=summary.mean_abs_error_pct,
            budgeted_months=summary.budgeted_months,
            status_right=summary.status_right,
            sentence=record_sentence(summary),
        ),
        notes=[BACKTEST_NOTE] if any(m.forecast.source == "backtest" for m in shown) else [],
    )


def _month_out(m: ScoredMonth) -> RecordMonthOut:
    f = m.forecast
    return RecordMonthOut(
        month=f.month.strftime("%Y-%m"),
        source=f.source,
        forecast_at=f.forecast_at,
        expected_bill_usd=f.expected_bill_usd,
        bill_p10_usd=f.bill_p10_usd,
        bill_p90_usd=f.bill_p90_usd,
        p_over_budget=f.p_over_budget,
        budget_usd=f.budget_usd,
        status=f.status,
        actual_usd=m.actual_usd,
        p90_exceeded=m.p90_exceeded,
        inside_band=m.inside_band,
        error_pct=m.error_pct,
        budget_exceeded=m.budget_exceeded,
        status_right=m.status_right,
    )
