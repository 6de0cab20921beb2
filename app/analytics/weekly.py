"""Weekly goodput: ISO weeks (Monday first, UTC) summed in SQL, empty weeks filled in."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

from sqlalchemy.orm import Session

from app.analytics import repository as repo
from app.analytics.schemas import GoodputOut
from app.db import rollup_reads
from app.db.models import Pipeline
from app.pipelines.service import get_by_name
from app.planning.goodput import EMPTY_TOTALS, goodput_from_totals
from app.planning.sources import trend_source_warnings
from app.planning.weekly import WeekSummary, WeekTotals, fill_weeks, monday_of, utc_midnight


def latest_weeks_goodput(
    session: Session, pipeline: Pipeline
) -> tuple[date, dict[date, float | None]] | None:
    """The Monday of the latest ISO week with runs, and the overall goodput of that week
    and the week before, by Monday (used by /metrics and the goodput_drop alert)."""
    span = repo.run_span(session, pipeline.id)
    if span is None:
        return None
    monday = monday_of(span[1])
    since = utc_midnight(monday) - timedelta(weeks=1)
    rows = repo.weekly_totals(session, pipeline.id, since, since + timedelta(weeks=2))
    weeks = {
        w.week_start: goodput_from_totals(w.goodput).overall for w in rows.get(pipeline.id, [])
    }
    return monday, weeks


def latest_week(session: Session, pipeline: Pipeline) -> WeekSummary | None:
    """The summary of the latest ISO week with runs (goodput, badput by cause)."""
    span = repo.run_span(session, pipeline.id)
    if span is None:
        return None
    monday = monday_of(span[1])
    since = utc_midnight(monday)
    rows = repo.weekly_totals(session, pipeline.id, since, since + timedelta(weeks=1))
    weeks = rows.get(pipeline.id, [])
    return fill_weeks(weeks, monday, monday)[0] if weeks else None


def goodput(session: Session, name: str, *, weeks: int, until: datetime | None) -> GoodputOut:
    pipeline = get_by_name(session, name)
    span = repo.run_span(session, pipeline.id)
    end = until or (span[1] if span else datetime.now(UTC))
    end_monday = monday_of(end.date())  # the week of ``until`` as the caller wrote it
    start_monday = end_monday - timedelta(weeks=weeks - 1)
    since = utc_midnight(start_monday)
    rows = repo.weekly_totals(session, pipeline.id, since, since + timedelta(weeks=weeks))
    summaries = fill_weeks(rows.get(pipeline.id, []), start_monday, end_monday)
    total = EMPTY_TOTALS
    for r in rows.get(pipeline.id, []):
        total = total + r.goodput
    sources = repo.utilization_sources(session, pipeline.id, since, since + timedelta(weeks=weeks))
    return GoodputOut(
        pipeline=name,
        weeks=summaries,
        total=goodput_from_totals(total),
        warnings=trend_source_warnings(sources),
    )


def week_totals(
    session: Session, pipeline: Pipeline | None, since: datetime, until: datetime
) -> dict[int | None, list[WeekTotals]]:
    """SQL sums per ISO week in [since, until), by pipeline id (every pipeline: None)."""
    return repo.weekly_totals(session, None if pipeline is None else pipeline.id, since, until)


def recorded_spend(
    session: Session, pipelines: list[Pipeline], since: datetime, until: datetime
) -> dict[int, float]:
    """USD recorded per pipeline id for runs started in [since, until), every variant, at
    the price frozen on each run."""
    return repo.recorded_spend(session, [p.id for p in pipelines], since, until)


# Org-wide reads come from the rollup table (app/db/rollup_reads.py), a few rows per pipeline and
# week, never from the runs: the portfolio and the review through app.analytics.org_weeks,
# /metrics through this.


def week_of(session: Session, monday: date) -> dict[int, WeekTotals]:
    """Every pipeline's totals for the ISO week starting ``monday``, by pipeline id."""
    return rollup_reads.week_of(session, monday)
