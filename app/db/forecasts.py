"""The forecast record's statements: the stored forecasts (``forecast_record``), the one
insert that never rewrites one, and the one read of a pipeline's attempts that its
backtests are computed from (``app.analytics.record``)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.db.engine import WriteSession
from app.db.models import ForecastRecord, Pipeline, Run, RunVariant
from app.db.rollup import ROLLUP
from app.db.run_terms import as_date, wall_clock
from app.db.sql import dialect, effective_price, explained_hours, in_ids, upsert_insert
from app.planning.backtest import RecordRun
from app.planning.record import MonthForecast

FORECAST_COLUMNS = (
    ForecastRecord.month,
    ForecastRecord.forecast_at,
    ForecastRecord.expected_bill_usd,
    ForecastRecord.bill_p10_usd,
    ForecastRecord.bill_p90_usd,
    ForecastRecord.p_over_budget,
    ForecastRecord.budget_usd,
    ForecastRecord.status,
    ForecastRecord.source,
)  # MonthForecast's fields, in its order


def stored(
    session: Session, pipeline_ids: Sequence[int] | None, since: date, until: date
) -> dict[int, dict[date, MonthForecast]]:
    """The stored forecasts of months in [since, until), by pipeline id and month, of
    these pipelines (every one: None). Plain rows, not ORM objects: the organisation's
    record reads a year of 5,000 pipelines' rows."""
    stmt = select(ForecastRecord.pipeline_id, *FORECAST_COLUMNS).where(
        ForecastRecord.month >= since, ForecastRecord.month < until
    )
    if pipeline_ids is not None:
        stmt = stmt.where(in_ids(session, ForecastRecord.pipeline_id, list(pipeline_ids)))
    out: dict[int, dict[date, MonthForecast]] = {}
    for pid, *values in session.execute(stmt):
        forecast = MonthForecast(*values)
        out.setdefault(pid, {})[forecast.month] = forecast
    return out


def names(session: Session, pipeline_ids: Sequence[int]) -> dict[int, str]:
    """The names of these pipelines, by id."""
    stmt = select(Pipeline.id, Pipeline.name).where(
        in_ids(session, Pipeline.id, list(pipeline_ids))
    )
    return {pid: name for pid, name in session.execute(stmt)}


def month_spends(
    session: Session, pipeline_ids: Sequence[int], since: date, until: date
) -> dict[int, dict[date, float]]:
    """Recorded USD of every attempt started in each calendar month in [since, until),
    by pipeline id and month (the rollups; every variant, at the frozen price): what
    each month cost, as this month's spend to date adds it up."""
    r = ROLLUP.c
    stmt = (
        select(r.pipeline_id, r.month_start, func.sum(r.cost))
        .where(r.month_start >= since, r.month_start < until)
        .where(in_ids(session, r.pipeline_id, list(pipeline_ids)))
        .group_by(r.pipeline_id, r.month_start)
    )
    out: dict[int, dict[date, float]] = {}
    for pid, first, usd in session.execute(stmt):
        out.setdefault(pid, {})[as_date(first)] = float(usd)
    return out


def insert_if_absent(session: WriteSession, pipeline_id: int, forecast: MonthForecast) -> bool:
    """Store a month's forecast unless the pipeline has one for that month (then nothing
    changes: a stored forecast is never rewritten). True when this one was stored."""
    values = {
        "pipeline_id": pipeline_id,
        "month": forecast.month,
        "forecast_at": forecast.forecast_at,
        "expected_bill_usd": forecast.expected_bill_usd,
        "bill_p10_usd": forecast.bill_p10_usd,
        "bill_p90_usd": forecast.bill_p90_usd,
        "p_over_budget": forecast.p_over_budget,
        "budget_usd": forecast.budget_usd,
        "status": forecast.status,
        "source": forecast.source,
    }
    stmt = upsert_insert(session, ForecastRecord.__table__).values(**values)
    skip = stmt.on_conflict_do_nothing(index_elements=["pipeline_id", "month"])
    return session.execute(skip.returning(ForecastRecord.id)).first() is not None


def unrecorded(session: Session, month: date, limit: int) -> list[tuple[int, str]]:
    """Up to ``limit`` (id, name) of pipelines whose production variant has runs and that have
    no stored forecast for ``month``, lowest id first."""
    has_row = select(ForecastRecord.id).where(
        ForecastRecord.pipeline_id == Pipeline.id, ForecastRecord.month == month
    )
    has_runs = select(RunVariant.pipeline_id).where(
        RunVariant.pipeline_id == Pipeline.id,
        RunVariant.variant == Pipeline.production_variant,
        RunVariant.last_started_at.is_not(None),
    )
    stmt = (
        select(Pipeline.id, Pipeline.name)
        .where(has_runs.exists(), ~has_row.exists())
        .order_by(Pipeline.id)
        .limit(limit)
    )
    return [(pid, name) for pid, name in session.execute(stmt)]


def record_runs(
    session: Session, pipeline_id: int, since: datetime, until: datetime
) -> list[RecordRun]:
    """Every finished attempt of the pipeline started in [since, until), sorted by start,
    as its backtests need them (``app.planning.backtest``): one statement."""
    backend = dialect(session)
    # SQLite's two-argument max() is PostgreSQL's greatest().
    longest = func.max if backend == "sqlite" else func.greatest
    stmt = (
        select(
            Run.started_at,
            Run.variant,
            Run.retraining_id,
            Run.outcome,
            Run.gpu_utilization.is_not(None).label("measured"),
            Run.workers,
            longest(wall_clock(backend), explained_hours()),
            Run.gpu_hours,
            effective_price(),
            Run.billed_price_per_gpu_hour,
        )
        .join(Pipeline, Pipeline.id == Run.pipeline_id)
        .where(Run.pipeline_id == pipeline_id, Run.started_at >= since, Run.started_at < until)
        .where(Run.finished_at.is_not(None))
        .order_by(Run.started_at, Run.id)
    )
    return [
        RecordRun(
            started_at=started,
            variant=variant,
            retraining_id=retraining,
            succeeded=outcome == "succeeded",
            planning=outcome == "succeeded" and bool(measured),
            workers=int(workers),
            hours=float(h),
            gpu_hours=float(gpu),
            price=float(price),
            billed_price=float(billed),
        )
        for started, variant, retraining, outcome, measured, workers, h, gpu, price, billed in (
            session.execute(stmt)
        )
    ]
