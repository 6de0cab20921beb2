"""Weekly goodput: ISO weeks (Monday first, UTC) summed in SQL, empty weeks filled in."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from sqlalchemy.orm import Session

from app.analytics import repository as repo
from app.analytics.schemas import GoodputOut
from app.db import rollup_reads
from app.db.models import Pipeline
from app.exceptions import Invalid
from app.pipelines.service import get_by_name
from app.planning.goodput import EMPTY_TOTALS, goodput_from_totals
from app.planning.rollup import SUMS
from app.planning.sources import trend_source_warnings
from app.planning.weekly import WeekSummary, fill_weeks, monday_of, utc_midnight


def latest_start(session: Session, pipeline: Pipeline) -> datetime | None:
    """The newest start among the pipeline's runs (``run_variant``: no scan of runs)."""
    newest = rollup_reads.newest_starts(session, [pipeline.id]).get(pipeline.id, {})
    return max(newest.values(), default=None)


def latest_weeks_goodput(
    session: Session, pipeline: Pipeline
) -> tuple[date, dict[date, float | None]] | None:
    """The Monday of the latest ISO week with runs, and the overall goodput of that week
    and the week before, by Monday (used by /metrics and the goodput_drop alert)."""
    latest = latest_start(session, pipeline)
    if latest is None:
        return None
    monday = monday_of(latest)
    since = utc_midnight(monday) - timedelta(weeks=1)
    until = since + timedelta(weeks=2)
    rows = repo.weekly_totals(session, pipeline.id, since, until, pipeline.production_variant)
    weeks = {
        w.week_start: goodput_from_totals(w.goodput).overall for w in rows.get(pipeline.id, [])
    }
    return monday, weeks


def latest_week(session: Session, pipeline: Pipeline) -> WeekSummary | None:
    """The summary of the latest ISO week with runs (goodput, badput by cause)."""
    latest = latest_start(session, pipeline)
    if latest is None:
        return None
    monday = monday_of(latest)
    since = utc_midnight(monday)
    rows = repo.weekly_totals(session, pipeline.id, since, since + timedelta(weeks=1))
    weeks = rows.get(pipeline.id, [])
    return fill_weeks(weeks, monday, monday)[0] if weeks else None


def chosen_variant(session: Session, pipeline: Pipeline, variant: str | None) -> str:
    """``variant``, else the production variant; a variant without runs is a 422 naming
    the variants that have some (a pipeline without runs accepts its production one)."""
    known = sorted(rollup_reads.newest_starts(session, [pipeline.id]).get(pipeline.id, {}))
    if variant is None or variant in known:
        return variant or pipeline.production_variant
    listed = ", ".join(known) or "none yet"
    raise Invalid(
        f"variant: pipeline {pipeline.name!r} has no runs of variant {variant!r} "
        f"(variants: {listed})",
        fields=[{"field": "variant", "reason": f"unknown variant; variants: {listed}"}],
    )


def goodput(
    session: Session, name: str, *, weeks: int, until: datetime | None, variant: str | None = None
) -> GoodputOut:
    """The goodput weeks of one variant (default: production, not its experiments)."""
    pipeline = get_by_name(session, name)
    chosen = chosen_variant(session, pipeline, variant)
    end = until or latest_start(session, pipeline) or datetime.now(UTC)
    end_monday = monday_of(end.date())  # the week of ``until`` as the caller wrote it
    start_monday = end_monday - timedelta(weeks=weeks - 1)
    since = utc_midnight(start_monday)
    until_ = since + timedelta(weeks=weeks)
    rows = repo.weekly_totals(session, pipeline.id, since, until_, chosen)
    summaries = fill_weeks(rows.get(pipeline.id, []), start_monday, end_monday)
    total = EMPTY_TOTALS
    for r in rows.get(pipeline.id, []):
        total = total + r.goodput
    sources = repo.utilization_sources(session, pipeline.id, since, until_, chosen)
    return GoodputOut(
        pipeline=name,
        variant=chosen,
        weeks=summaries,
        total=goodput_from_totals(total),
        warnings=trend_source_warnings(sources),
    )


@dataclass(frozen=True)
class PageWeeks:
    """What a pipeline page shows of its weeks and its month, from one read of its runs."""

    weeks: list[WeekSummary]  # the goodput trend, oldest first, empty weeks filled in
    warnings: list[str]  # the trend's (mixed utilization sources)
    month_spend: dict[str, float]  # this calendar month's recorded USD by variant


def page_weeks(
    session: Session, pipeline: Pipeline, latest: datetime | None, weeks: int, now: datetime
) -> PageWeeks:
    """The ``weeks`` ISO weeks of the production variant up to the one of the ``latest``
    run (as ``GET .../goodput`` has them by default) and this month's spend by variant
    (as ``run_rollup`` has it), from one GROUP BY over the runs in both spans."""
    end_monday = monday_of((latest or now).date())
    start_monday = end_monday - timedelta(weeks=weeks - 1)
    month = now.astimezone(UTC).date().replace(day=1)
    since, until = utc_midnight(start_monday), utc_midnight(end_monday + timedelta(weeks=1))
    next_month = utc_midnight((month + timedelta(days=32)).replace(day=1))
    lo, hi = min(since, utc_midnight(month)), max(until, next_month)
    by_week: dict[date, dict[str, float]] = {}
    sources: dict[str | None, int] = {}
    spend: dict[str, float] = {}
    for row in rollup_reads.run_buckets(session, pipeline.id, lo, hi):
        if row["month_start"] == month:
            spend[row["variant"]] = spend.get(row["variant"], 0.0) + row["cost"]
        if not start_monday <= row["week_start"] <= end_monday:
            continue
        if row["variant"] != pipeline.production_variant:
            continue
        sources[row["utilization_source"]] = sources.get(row["utilization_source"], 0) + row["runs"]
        sums = by_week.setdefault(row["week_start"], dict.fromkeys(("runs", *SUMS), 0.0))
        for name in sums:
            sums[name] += row[name]
    totals = [rollup_reads.totals_from(monday, m) for monday, m in sorted(by_week.items())]
    summaries = fill_weeks(totals, start_monday, end_monday)
    return PageWeeks(summaries, trend_source_warnings(sources), spend)


def recorded_spend(
    session: Session, pipelines: list[Pipeline], since: datetime, until: datetime
) -> dict[int, float]:
    """USD recorded per pipeline id for runs started in [since, until), every variant, at
    the price frozen on each run."""
    return repo.recorded_spend(session, [p.id for p in pipelines], since, until)
