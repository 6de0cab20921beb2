"""Reading the rollups (``run_rollup``, ``run_variant``): what org-wide views add up.

The tables and how they are kept in step with ``run`` are in :mod:`app.db.rollup`;
features read these through ``app.analytics.org_weeks`` and ``app.analytics.weekly``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, NamedTuple

from sqlalchemy import String, case, func, literal, select
from sqlalchemy.orm import Session

from app.db.kept import KEEPS
from app.db.memo import per_read_session
from app.db.models import Pipeline, Run
from app.db.rollup import ROLLUP, VARIANTS, _recompute_select
from app.db.run_terms import as_date, goodput_totals
from app.db.sql import dialect, in_ids
from app.planning.rollup import CAUSES, SUMS
from app.planning.weekly import WeekTotals


def weekly_totals(
    session: Session,
    since: date,
    until: date,
    pipeline_ids: Sequence[int] | None = None,
    *,
    only: Sequence[str] | None = (),
) -> dict[int, list[WeekTotals]]:
    """Like ``app.analytics.repository.weekly_totals`` for every pipeline (or these),
    from the rollups: weeks with Monday in [since, until), USD as recorded. Pages read
    the kept window (``app.analytics.org_weeks``); this direct read is what the tests
    hold the window equal to.

    With ``only`` other than ``()``, the sums are over all pipelines (None) or those
    named (a token's limit) together, under the key 0.
    """
    r = ROLLUP.c
    together = only != ()
    pid = literal(0).label("pipeline_id") if together else r.pipeline_id
    stmt = (
        select(
            pid,
            r.week_start,
            func.sum(r.runs).label("runs"),
            *[func.sum(r[n]).label(n) for n in SUMS],
        )
        .join(Pipeline, Pipeline.id == r.pipeline_id)
        .where(r.week_start >= since, r.week_start < until)
        .group_by(*([] if together else [r.pipeline_id]), r.week_start)
        .order_by(*([] if together else [r.pipeline_id]), r.week_start)
    )
    if together and only is not None:
        stmt = stmt.where(Pipeline.name.in_(list(only)))
    if pipeline_ids is not None:
        stmt = stmt.where(r.pipeline_id.in_(list(pipeline_ids)))
    out: dict[int, list[WeekTotals]] = {}
    for row in session.execute(stmt):
        m = row._mapping
        out.setdefault(row.pipeline_id, []).append(totals_from(as_date(m["week_start"]), m))
    return out


def totals_from(monday: date, m: Mapping[Any, Any]) -> WeekTotals:
    """A week's WeekTotals from ``runs`` and the :data:`SUMS` columns, by name (a rollup
    row summed over variants, or the kept window's row of sums)."""
    return WeekTotals(
        week_start=monday,
        goodput=goodput_totals(m),
        cost_usd=float(m["cost"]),
        gpu_hours_by_cause={c: float(m[f"g_{c}"]) for c in CAUSES},
        usd_by_cause={c: float(m[f"u_{c}"]) for c in CAUSES},
    )


def window_rows(
    session: Session, since: date, until: date, pipeline_ids: Sequence[int] | None
) -> list[dict[str, Any]]:
    """Rows summed over variants, per pipeline, ISO week (Monday in [since, until)),
    calendar month and ``production`` (1: the pipeline's production variant, else 0),
    of these pipelines (every one: None): ``runs`` and every SUMS column, USD as
    recorded."""
    r = ROLLUP.c
    production = case((r.variant == Pipeline.production_variant, 1), else_=0)
    stmt = (
        select(
            r.pipeline_id,
            r.week_start,
            r.month_start,
            production.label("production"),
            func.sum(r.runs).label("runs"),
            *[func.sum(r[n]).label(n) for n in SUMS],
        )
        .join(Pipeline, Pipeline.id == r.pipeline_id)
        .where(r.week_start >= since, r.week_start < until)
        .group_by(r.pipeline_id, r.week_start, r.month_start, production)
    )
    if pipeline_ids is not None:
        stmt = stmt.where(in_ids(session, r.pipeline_id, list(pipeline_ids)))
    return [dict(row._mapping) for row in session.execute(stmt)]


@dataclass(frozen=True)
class ChangeCounters:
    """``run_variant.changes``: every write of a run (insert, delete, measurement update)
    increases its variant's counter in the same transaction (``app.db.rollup``), and every
    write of a change note increases all of its pipeline's (the forecast reads them)."""

    by_variant: dict[tuple[int, str], int]  # (pipeline id, variant): its counter
    by_pipeline: dict[int, int]  # the pipeline's change count: the sum of its variants'


def change_counters(session: Session, pipeline_ids: Sequence[int] | None = None) -> ChangeCounters:
    """The change counters of these pipelines' variants (every one: None), and perhaps of
    others. In a read unit of work (``Database.read``, ``read_latest``) every counter is
    read once, by the first read of more than one pipeline, and every later read of the
    request is answered from it: one snapshot for the whole page, whatever the
    organisation's size (the portfolio's weeks, costs, month to date and record all key
    on them). One pipeline alone (an alert's evaluation) reads its own. A write session
    reads again each time, since it may have moved them. Callers must not change the
    dicts."""
    if pipeline_ids is not None and (len(pipeline_ids) < 2 or not session.info.get(KEEPS)):
        return _change_counters(session, list(pipeline_ids))
    return _every_change_counter(session)


def production_variants(session: Session, pipeline_ids: Sequence[int] | None) -> dict[int, str]:
    """Each pipeline's production variant, by id (these; every one: None)."""
    stmt = select(Pipeline.id, Pipeline.production_variant)
    if pipeline_ids is not None:
        stmt = stmt.where(in_ids(session, Pipeline.id, list(pipeline_ids)))
    return {pid: variant for pid, variant in session.execute(stmt)}


class Costing(NamedTuple):
    """What a pipeline's cost window is read with (``app.analytics.costs.Costed``)."""

    id: int
    production_variant: str
    price_per_gpu_hour: float
    runs_per_week: float


@per_read_session
def costings(session: Session) -> list[Costing]:
    """Every pipeline's production variant, price and cadence, by id: the organisation's
    prior reads every pipeline's window (``app.analytics.prior``), whatever a page lists."""
    p = Pipeline
    stmt = select(p.id, p.production_variant, p.price_per_gpu_hour, p.runs_per_week)
    return [Costing._make(row) for row in session.execute(stmt.order_by(p.id))]


@per_read_session
def prior_stamp(session: Session) -> tuple[object, ...]:
    """What the organisation's prior is made from, in one row (``app.analytics.prior``):
    every pipeline's id, production variant and price as one text (PostgreSQL hashes it
    with md5), and the count and sum of the production variants' change counters. The
    counters only grow, each with every write of one of the variant's runs, so the sum
    moves whenever a production window may have; a pipeline added, removed, or given
    another production variant or price moves the text. Read in one statement, not the
    5,000 rows of settings and 10,000 counters it stands for."""
    p, v = Pipeline, VARIANTS.c
    each = (
        func.cast(p.id, String)
        + ":"
        + p.production_variant
        + ":"
        + func.cast(p.price_per_gpu_hour, String)
    )
    ordered = select(each.label("each")).order_by(p.id).subquery()
    if dialect(session) == "postgresql":
        settings = func.md5(func.string_agg(ordered.c.each, literal(",")))
    else:  # SQLite keeps the subquery's order in group_concat
        settings = func.group_concat(ordered.c.each, ",")
    produced = (p.id == v.pipeline_id) & (p.production_variant == v.variant)
    counters = select(func.count(), func.coalesce(func.sum(v.changes), 0)).join_from(
        VARIANTS, p, produced
    )
    row = session.execute(select(select(settings).scalar_subquery(), counters.subquery())).one()
    return tuple(row)


def change_counts(session: Session, pipeline_ids: Sequence[int] | None = None) -> dict[int, int]:
    """Per pipeline id with runs ever stored (of these, perhaps more; every one: None), the
    sum of its variants' change counters: it grows with every write of one of its runs, and only
    then. Callers must not change the dict."""
    return change_counters(session, pipeline_ids).by_pipeline


@per_read_session
def _every_change_counter(session: Session) -> ChangeCounters:
    return _change_counters(session, None)


def _change_counters(session: Session, pipeline_ids: list[int] | None) -> ChangeCounters:
    v = VARIANTS.c
    stmt = select(v.pipeline_id, v.variant, v.changes)
    if pipeline_ids is not None:
        stmt = stmt.where(in_ids(session, v.pipeline_id, pipeline_ids))
    rows = session.execute(stmt).all()
    # Summed here, not by a GROUP BY: PostgreSQL sums bigints as numeric (~15 ms for
    # 10,000 variants), this loop ~5 ms.
    by_pipeline: dict[int, int] = {}
    for pid, _, changes in rows:
        by_pipeline[pid] = by_pipeline.get(pid, 0) + changes
    return ChangeCounters({(pid, variant): n for pid, variant, n in rows}, by_pipeline)


def month_spend(
    session: Session, month: date, until: date, pipeline_ids: Sequence[int] | None
) -> dict[int, float]:
    """Recorded USD per pipeline for runs started in this calendar month (UTC) in ISO
    weeks before ``until`` (a Monday): month-to-date at the end of a week. Exact, since a
    week that spans two months has a row in each."""
    r = ROLLUP.c
    stmt = (
        select(r.pipeline_id, func.sum(r.cost))
        .where(r.month_start == month, r.week_start < until)
        .group_by(r.pipeline_id)
    )
    if pipeline_ids is not None:
        stmt = stmt.where(r.pipeline_id.in_(list(pipeline_ids)))
    return {pid: float(v) for pid, v in session.execute(stmt)}


def month_spend_by_variant(
    session: Session, month: date, pipeline_ids: Sequence[int] | None
) -> dict[int, dict[str, float]]:
    """Recorded USD of every attempt started in this calendar month (UTC), per pipeline and
    variant (experiments and probes included): the bill so far."""
    r = ROLLUP.c
    stmt = (
        select(r.pipeline_id, r.variant, func.sum(r.cost))
        .where(r.month_start == month)
        .group_by(r.pipeline_id, r.variant)
    )
    if pipeline_ids is not None:
        stmt = stmt.where(in_ids(session, r.pipeline_id, list(pipeline_ids)))
    out: dict[int, dict[str, float]] = {}
    for pid, variant, usd in session.execute(stmt):
        out.setdefault(pid, {})[variant] = float(usd)
    return out


def newest_starts(
    session: Session, pipeline_ids: Sequence[int] | None
) -> dict[int, dict[str, datetime]]:
    """Each pipeline's variants' newest run start (``run_variant``), by pipeline id."""
    v = VARIANTS.c
    stmt = select(v.pipeline_id, v.variant, v.last_started_at).where(v.last_started_at.is_not(None))
    if pipeline_ids is not None:
        stmt = stmt.where(in_ids(session, v.pipeline_id, list(pipeline_ids)))
    out: dict[int, dict[str, datetime]] = {}
    for pid, variant, started in session.execute(stmt):
        out.setdefault(pid, {})[variant] = started
    return out


def run_buckets(
    session: Session, pipeline_id: int, since: datetime, until: datetime
) -> list[dict[str, Any]]:
    """One pipeline's rollup rows for runs started in [since, until), computed from the
    runs and split by ``utilization_source`` too: what one page needs of its weeks (the
    trend, its sources) and of its month (spend by variant) in one GROUP BY."""
    stmt = (
        _recompute_select(dialect(session))
        .add_columns(Run.utilization_source)
        .where(Run.pipeline_id == pipeline_id, Run.started_at >= since, Run.started_at < until)
        .group_by(Run.utilization_source)
    )
    rows = [dict(r._mapping) for r in session.execute(stmt)]
    for r in rows:
        r["week_start"], r["month_start"] = as_date(r["week_start"]), as_date(r["month_start"])
    return rows
