"""Rollup queries: keeping ``run_rollup`` in step with ``run``, and reading it.

Writers call :func:`add` in the transaction that inserts or deletes runs (one upsert per
touched key; the single-run PostgreSQL path does it inside its one statement, see
``app.runs.repository.insert_one_pg``). :func:`recompute` is the same sums computed from
the runs in SQL, for :func:`rebuild` and the equivalence tests.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date
from typing import Any, cast

from sqlalchemy import Date, Float, Table, and_, case, delete, func, insert, literal, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session

from app.analytics.repository import as_date, goodput_totals, run_terms, week_start
from app.db.models import Pipeline, Run, RunRollup
from app.planning.rollup import CAUSES, KEY, SUMS
from app.planning.weekly import WeekTotals

ROLLUP = cast(Table, RunRollup.__table__)


def _dialect(session: Session | Connection) -> str:
    bind = session.get_bind() if isinstance(session, Session) else session
    return bind.dialect.name


def add(session: Session, rows: Sequence[dict[str, Any]]) -> None:
    """Add these deltas (from :func:`app.planning.rollup.deltas`) to their rows, creating
    missing rows; then drop rows left with no runs (after deletes)."""
    if not rows:
        return
    ins = (postgresql.insert if _dialect(session) == "postgresql" else sqlite.insert)(ROLLUP)
    stmt = ins.on_conflict_do_update(
        index_elements=list(KEY),
        set_={c: ROLLUP.c[c] + ins.excluded[c] for c in ("runs", *SUMS)},
    )
    session.execute(stmt, list(rows))
    if any(r["runs"] < 0 for r in rows):
        session.execute(delete(ROLLUP).where(ROLLUP.c.runs <= 0))


def month_start(dialect: str) -> Any:
    if dialect == "postgresql":
        return cast(Any, func.date_trunc("month", func.timezone("UTC", Run.started_at)))
    return func.date(Run.started_at, "start of month")


def _recompute_select(session: Session | Connection) -> Any:
    dialect = _dialect(session)
    terms, causes = run_terms(dialect)
    priced = Run.price_per_gpu_hour.is_not(None)
    price = func.coalesce(Run.price_per_gpu_hour, 0.0)
    week, month = week_start(dialect), month_start(dialect)
    if dialect == "postgresql":
        week, month = func.cast(week, Date), func.cast(month, Date)

    def total(expr: Any) -> Any:
        return func.coalesce(func.sum(func.cast(expr, Float)), 0.0)

    sums = {name: total(terms[name]) for name in terms}
    sums["priced_cost"] = total(case((priced, Run.gpu_hours * price), else_=0.0))
    sums["unpriced_gpu_hours"] = total(case((priced, 0.0), else_=Run.gpu_hours))
    for c in CAUSES:
        sums[f"g_{c}"] = total(causes[c])
        sums[f"pu_{c}"] = total(case((priced, causes[c] * price), else_=0.0))
        sums[f"ug_{c}"] = total(case((priced, 0.0), else_=causes[c]))
    return (
        select(
            Run.pipeline_id, Run.variant, week.label("week_start"), month.label("month_start"),
            func.count().label("runs"), *[sums[name].label(name) for name in SUMS],
        )
        .group_by(Run.pipeline_id, Run.variant, week, month)
    )  # fmt: skip


def recompute(session: Session) -> list[dict[str, Any]]:
    """What ``run_rollup`` should hold, computed from the runs, sorted by key."""
    rows = [dict(r._mapping) for r in session.execute(_recompute_select(session))]
    for r in rows:
        r["week_start"], r["month_start"] = as_date(r["week_start"]), as_date(r["month_start"])
    return sorted(rows, key=lambda r: tuple(r[k] for k in KEY))


def stored(session: Session) -> list[dict[str, Any]]:
    rows = session.execute(select(ROLLUP).order_by(*[ROLLUP.c[k] for k in KEY]))
    return [dict(r._mapping) for r in rows]


def rebuild(session: Session | Connection) -> int:
    """Replace the rollups with a recomputation from the runs (migration, bulk loads)."""
    session.execute(delete(ROLLUP))
    columns = ["pipeline_id", "variant", "week_start", "month_start", "runs", *SUMS]
    result = session.execute(insert(ROLLUP).from_select(columns, _recompute_select(session)))
    return int(getattr(result, "rowcount", 0) or 0)


def weekly_totals(
    session: Session,
    since: date,
    until: date,
    pipeline_ids: Sequence[int] | None = None,
    *,
    only: Sequence[str] | None = (),
) -> dict[int, list[WeekTotals]]:
    """Like ``app.analytics.repository.weekly_totals`` for every pipeline (or these),
    from the rollups: weeks with Monday in [since, until), USD at today's prices.

    With ``only`` other than ``()``, the sums are over all pipelines (None) or those
    named (a token's limit) together, under the key 0.
    """
    r = ROLLUP.c
    price = Pipeline.price_per_gpu_hour
    together = only != ()
    pid = literal(0).label("pipeline_id") if together else r.pipeline_id

    def usd(priced: str, unpriced: str) -> Any:
        return func.sum(r[priced] + r[unpriced] * price)

    stmt = (
        select(
            pid, r.week_start, func.sum(r.runs).label("runs"),
            *[func.sum(r[n]).label(n) for n in SUMS if n[:2] not in ("pu", "ug")],
            usd("priced_cost", "unpriced_gpu_hours").label("cost"),
            *[usd(f"pu_{c}", f"ug_{c}").label(f"u_{c}") for c in CAUSES],
        )
        .join(Pipeline, Pipeline.id == r.pipeline_id)
        .where(r.week_start >= since, r.week_start < until)
        .group_by(*([] if together else [r.pipeline_id]), r.week_start)
        .order_by(*([] if together else [r.pipeline_id]), r.week_start)
    )  # fmt: skip
    if together and only is not None:
        stmt = stmt.where(Pipeline.name.in_(list(only)))
    if pipeline_ids is not None:
        stmt = stmt.where(r.pipeline_id.in_(list(pipeline_ids)))
    out: dict[int, list[WeekTotals]] = {}
    for row in session.execute(stmt):
        m = row._mapping
        out.setdefault(row.pipeline_id, []).append(
            WeekTotals(
                week_start=as_date(m["week_start"]),
                goodput=goodput_totals(m),
                cost_usd=float(m["cost"]),
                gpu_hours_by_cause={c: float(m[f"g_{c}"]) for c in CAUSES},
                usd_by_cause={c: float(m[f"u_{c}"]) for c in CAUSES},
            )
        )
    return out


def latest_weeks(session: Session) -> dict[int, WeekTotals]:
    """Each pipeline's latest ISO week with runs, its totals (for /metrics)."""
    r = ROLLUP.c
    latest = (
        select(r.pipeline_id, func.max(r.week_start).label("week"))
        .group_by(r.pipeline_id)
        .subquery()
    )
    stmt = (
        select(r.pipeline_id, r.week_start, func.sum(r.runs).label("runs"),
               *[func.sum(r[n]).label(n) for n in SUMS[:7]])
        .join(latest, and_(latest.c.pipeline_id == r.pipeline_id, latest.c.week == r.week_start))
        .group_by(r.pipeline_id, r.week_start)
    )  # fmt: skip
    return {
        row.pipeline_id: WeekTotals(as_date(row.week_start), goodput_totals(row._mapping), 0.0)
        for row in session.execute(stmt)
    }


def month_spend(session: Session, month: date) -> dict[int, float]:
    """USD spent per pipeline on runs started in this calendar month (UTC)."""
    r, price = ROLLUP.c, Pipeline.price_per_gpu_hour
    stmt = (
        select(r.pipeline_id, func.sum(r.priced_cost + r.unpriced_gpu_hours * price))
        .join(Pipeline, Pipeline.id == r.pipeline_id)
        .where(r.month_start == month)
        .group_by(r.pipeline_id)
    )  # fmt: skip
    return {pid: float(v) for pid, v in session.execute(stmt)}


def variant_counts(
    session: Session, pipeline_ids: Sequence[int] | None = None
) -> dict[int, list[tuple[str, int]]]:
    """Runs per variant per pipeline, most-run first (to pick each default variant)."""
    r = ROLLUP.c
    total = func.sum(r.runs)
    stmt = (
        select(r.pipeline_id, r.variant, total)
        .group_by(r.pipeline_id, r.variant)
        .order_by(r.pipeline_id, total.desc(), r.variant)
    )
    if pipeline_ids is not None:
        stmt = stmt.where(r.pipeline_id.in_(list(pipeline_ids)))
    out: dict[int, list[tuple[str, int]]] = {}
    for pid, variant, n in session.execute(stmt):
        out.setdefault(pid, []).append((variant, int(n)))
    return out
