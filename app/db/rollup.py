"""The ``run_rollup`` table: kept in step with ``run``, and read by org-wide views.

It lives in ``app/db`` because it is part of the data layer, like an index: every writer
of runs (``app.runs``) keeps it in step and several features read it. Writers call
:func:`add_runs` or :func:`subtract_run` in the transaction that inserts or deletes runs
(one upsert per touched key, summed in SQL from the stored rows); the single-run
PostgreSQL path does it inside its one statement, with the terms computed in Python
(``app.runs.repository.insert_one_pg`` and :data:`PG_UPSERT_CTE`). :func:`recompute` is
the same sums over every run, for :func:`rebuild` and the equivalence tests. Readers
are in :mod:`app.db.rollup_reads`. The same writers mark the bill's kept totals of the
runs' months moved (:mod:`app.db.bill_marks`); the single-run PostgreSQL path is never
taken by a run that names a cloud resource.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import datetime
from typing import Any, cast

from sqlalchemy import (
    Date,
    Float,
    Table,
    bindparam,
    case,
    delete,
    func,
    insert,
    inspect,
    literal,
    select,
    update,
)
from sqlalchemy.engine import Connection
from sqlalchemy.orm import Session

from app.db.bill_marks import mark_moved
from app.db.engine import WriteSession
from app.db.models import Run, RunRollup, RunVariant
from app.db.run_terms import as_date, month_start, run_terms, week_start
from app.db.sql import dialect, dialect_insert, in_ids_param, upsert_insert
from app.planning.rollup import CAUSES, KEY, PRICED, SUMS, buckets, terms

ROLLUP = cast(Table, RunRollup.__table__)
VARIANTS = cast(Table, RunVariant.__table__)

# The CTE the single-run PostgreSQL insert appends (after ``p``, the pipeline, and
# ``ins``, the inserted run RETURNING id and its frozen price): the run's rollup row,
# added to only when the run was inserted (``ins`` is empty on a retry). The sums travel
# as one array and the tables have short aliases: psycopg re-parses a statement on every
# call once it is longer than 4,096 characters or has more than 50 parameters (its
# query cache limits): 66 us of server CPU per run, ~5% of the single-run path. A test
# holds the whole statement under both.
PG_UPSERT_CTE = (
    f", roll AS (INSERT INTO run_rollup AS t ({', '.join(KEY)}, runs, {', '.join(SUMS)}) "
    "SELECT p.id, %(variant)s, %(r_week)s::date, %(r_month)s::date, 1, "
    + ", ".join(
        f"v.r[{i}]" + (" * ins.price" if c in PRICED else "") for i, c in enumerate(SUMS, 1)
    )
    + " FROM p, ins, (SELECT %(r)s::float8[] AS r) v"
    + f" ON CONFLICT ({', '.join(KEY)}) DO UPDATE SET "
    + ", ".join(f"{c} = t.{c} + excluded.{c}" for c in ("runs", *SUMS))
    # Reading ``roll`` makes ``var`` run after it: every writer locks the rollup row
    # before the variant's, so two writers never wait on each other in opposite orders.
    + " RETURNING 1), "
    "var AS (INSERT INTO run_variant AS w (pipeline_id, variant, runs, changes, last_started_at) "
    "SELECT p.id, %(variant)s, 1, 1, %(started_at)s::timestamptz FROM p, ins, roll "
    "ON CONFLICT (pipeline_id, variant) DO UPDATE SET runs = w.runs + 1, "
    "changes = w.changes + 1, "
    "last_started_at = GREATEST(w.last_started_at, excluded.last_started_at)) "
)


def pg_upsert_params(values: dict[str, Any]) -> dict[str, Any]:
    """The parameters :data:`PG_UPSERT_CTE` takes, from the run's column values. The USD
    terms are per unit of price: the statement multiplies by the price it froze."""
    sums = terms({**values, "billed_price_per_gpu_hour": 1.0})
    week, month = buckets(values["started_at"])
    return {"r": [sums[c] for c in SUMS], "r_week": week, "r_month": month}


def add_runs(session: WriteSession, run_ids: Sequence[int]) -> None:
    """Add these newly stored runs to their rollup rows, creating missing rows, and count
    them in ``run_variant`` (each variant touched: its run count, newest start and one
    change). Summed in SQL from the stored rows, like :func:`subtract_run`: in Python
    (terms per run, then an upsert row by row) a batch of 1,000 runs cost ~9 ms of the
    server's CPU, a sixth of the batch; PostgreSQL does it in ~7 ms (bench/README.md).
    Rows are locked in key order, rollup before variant, as every writer does.
    """
    if run_ids:
        rolled, counted = _adding(dialect(session))
        ids = {"ids": list(run_ids), "first": min(run_ids), "last": max(run_ids)}
        session.execute(rolled, ids)
        session.execute(counted, ids)
        mark_moved(session, run_ids)


def add_completed(session: WriteSession, run_ids: Sequence[int]) -> None:
    """Add running attempts that have just finished (their rows updated in place) to
    their rollup rows. ``run_variant`` counted them at their start already: only their
    variants' change counters move (:func:`count_changes`), in the same transaction."""
    if run_ids:
        rolled, _ = _adding(dialect(session))
        session.execute(rolled, {"ids": list(run_ids), "first": min(run_ids), "last": max(run_ids)})
        count_changes(session, run_ids)
        mark_moved(session, run_ids)


@functools.cache
def _adding(backend: str) -> tuple[Any, Any]:
    """The two upserts of :func:`add_runs`, built once per dialect (built per call they
    cost ~1 ms of Python); the run ids are the parameter ``ids``."""
    # The range as well as the list: with ``= ANY(ids)`` alone PostgreSQL scanned the
    # whole table (11.7 ms on 63,000 runs; 5.6 ms by the primary key with the range).
    chosen = in_ids_param(backend, Run.id) & Run.id.between(bindparam("first"), bindparam("last"))
    ins, vins = dialect_insert(backend, ROLLUP), dialect_insert(backend, VARIANTS)
    added = _recompute_select(backend).where(chosen).order_by(*KEY)
    rolled = ins.from_select([*KEY, "runs", *SUMS], added).on_conflict_do_update(
        index_elements=list(KEY),
        set_={c: ROLLUP.c[c] + ins.excluded[c] for c in ("runs", *SUMS)},
    )
    v = VARIANTS.c
    newer = vins.excluded.last_started_at
    per_variant = (
        select(Run.pipeline_id, Run.variant, func.count(), literal(1), func.max(Run.started_at))
        .where(chosen)
        .group_by(Run.pipeline_id, Run.variant)
        .order_by(Run.pipeline_id, Run.variant)
    )
    counted = vins.from_select(
        ["pipeline_id", "variant", "runs", "changes", "last_started_at"], per_variant
    ).on_conflict_do_update(
        index_elements=["pipeline_id", "variant"],
        set_={
            "runs": v.runs + vins.excluded.runs,
            "changes": v.changes + 1,
            # GREATEST would do on PostgreSQL; SQLite's max() of a NULL is NULL.
            "last_started_at": case(
                (v.last_started_at.is_(None) | (newer > v.last_started_at), newer),
                else_=v.last_started_at,
            ),
        },
    )
    return rolled, counted


def subtract_run(session: WriteSession, pk: int) -> None:
    """Take one run's terms out of its rollup row, computed in SQL from the stored row
    (a delete; the run need not load into Python), and drop the row if no runs remain."""
    mark_moved(session, [pk])
    one = _recompute_select(dialect(session)).where(Run.id == pk).subquery()
    ins = upsert_insert(session, ROLLUP)
    # A run stored before timestamps were range-checked (year 10000) has no week on
    # SQLite (NULL) and was never in the rollups there; nothing to take out.
    negated = select(*[one.c[k] for k in KEY], *[-one.c[c] for c in ("runs", *SUMS)]).where(
        one.c.week_start.is_not(None), one.c.month_start.is_not(None)
    )
    stmt = ins.from_select([*KEY, "runs", *SUMS], negated).on_conflict_do_update(
        index_elements=list(KEY),
        set_={c: ROLLUP.c[c] + ins.excluded[c] for c in ("runs", *SUMS)},
    )
    session.execute(stmt)
    session.execute(delete(ROLLUP).where(ROLLUP.c.runs <= 0))
    # Its variant: one run fewer, one change more, and the newest start of the others
    # (in SQL too: the run's start may not load, see above).
    v = VARIANTS.c
    it = select(Run.pipeline_id, Run.variant).where(Run.id == pk).subquery()
    others = (
        select(func.max(Run.started_at))
        .where(Run.pipeline_id == v.pipeline_id, Run.variant == v.variant, Run.id != pk)
        .scalar_subquery()
    )
    session.execute(
        update(VARIANTS)
        .where(
            v.pipeline_id == select(it.c.pipeline_id).scalar_subquery(),
            v.variant == select(it.c.variant).scalar_subquery(),
        )
        .values(runs=v.runs - 1, changes=v.changes + 1, last_started_at=others)
    )


def _recompute_select(backend: str, *, resumed_column: bool = True) -> Any:
    terms, causes = run_terms(backend, resumed_column=resumed_column)
    price = Run.billed_price_per_gpu_hour
    week, month = week_start(backend), month_start(backend)
    if backend == "postgresql":
        week, month = func.cast(week, Date), func.cast(month, Date)

    def total(expr: Any) -> Any:
        return func.coalesce(func.sum(func.cast(expr, Float)), 0.0)

    sums = {name: total(terms[name]) for name in terms}
    sums["cost"] = total(Run.gpu_hours * price)
    for c in CAUSES:
        sums[f"g_{c}"] = total(causes[c])
        sums[f"u_{c}"] = total(causes[c] * price)
    # A running attempt (no finish yet) adds nothing until it finishes (add_completed).
    return (
        select(
            Run.pipeline_id,
            Run.variant,
            week.label("week_start"),
            month.label("month_start"),
            func.count().label("runs"),
            *[sums[name].label(name) for name in SUMS],
        )
        .where(Run.finished_at.is_not(None))
        .group_by(Run.pipeline_id, Run.variant, week, month)
    )


# Not called by the server: the rollup tests' and bench/dataset.py's check of rebuild's SELECT.
def recompute(session: Session) -> list[dict[str, Any]]:
    """What ``run_rollup`` should hold, computed from the runs, sorted by key."""
    rows = [dict(r._mapping) for r in session.execute(_recompute_select(dialect(session)))]
    for r in rows:
        r["week_start"], r["month_start"] = as_date(r["week_start"]), as_date(r["month_start"])
    return sorted(rows, key=lambda r: tuple(r[k] for k in KEY))


def stored(session: Session) -> list[dict[str, Any]]:
    rows = session.execute(select(ROLLUP).order_by(*[ROLLUP.c[k] for k in KEY]))
    return [dict(r._mapping) for r in rows]


VariantRows = dict[tuple[int, str], tuple[int, datetime | None]]


# Not called by the server: the rollup tests' check of run_variant, beside its writers.
def variant_counts(session: Session) -> tuple[VariantRows, VariantRows]:
    """(What ``run_variant`` should hold, from the runs; what it holds): run count and
    newest start by (pipeline id, variant), variants with no runs left out of both (the
    equivalence tests)."""
    expected = session.execute(
        select(Run.pipeline_id, Run.variant, func.count(), func.max(Run.started_at)).group_by(
            Run.pipeline_id, Run.variant
        )
    )
    v = VARIANTS.c
    held = session.execute(
        select(v.pipeline_id, v.variant, v.runs, v.last_started_at).where(v.runs != 0)
    )
    return (
        {(p, name): (n, last) for p, name, n, last in expected},
        {(p, name): (n, last) for p, name, n, last in held},
    )


# Not called by the server: migrations 0018 and 0024 and bench/dataset.py rebuild with it.
def rebuild(session: WriteSession | Connection) -> int:
    """Replace the rollups with a recomputation from the runs (migration 0009, bulk loads
    such as the benchmark's COPY, which then calls :func:`rebuild_variants` too)."""
    session.execute(delete(ROLLUP))
    columns = ["pipeline_id", "variant", "week_start", "month_start", "runs", *SUMS]
    # A migration before revision 0024 rebuilds on a run table without resumed progress.
    bind = session if isinstance(session, Connection) else session.connection()
    resumed = "resumed_from_hours" in {c["name"] for c in inspect(bind).get_columns("run")}
    chosen = _recompute_select(dialect(session), resumed_column=resumed)
    result = session.execute(insert(ROLLUP).from_select(columns, chosen))
    return int(getattr(result, "rowcount", 0) or 0)


# Not called by the server: bench/dataset.py after its COPY.
def rebuild_variants(session: WriteSession | Connection) -> None:
    """Replace ``run_variant`` with counts from the runs. Every counter starts above the
    highest pipeline change count before (:func:`change_counts`), so neither a counter nor a
    change count a running process has cached is seen again."""
    per_pipeline = (
        select(func.sum(VARIANTS.c.changes).label("s")).group_by(VARIANTS.c.pipeline_id).subquery()
    )
    floor = session.execute(select(func.coalesce(func.max(per_pipeline.c.s), 0))).scalar_one()
    session.execute(delete(VARIANTS))
    counted = select(
        Run.pipeline_id,
        Run.variant,
        func.count(),
        func.count() + literal(floor + 1),
        func.max(Run.started_at),
    ).group_by(Run.pipeline_id, Run.variant)
    columns = ["pipeline_id", "variant", "runs", "changes", "last_started_at"]
    session.execute(insert(VARIANTS).from_select(columns, counted))


def shift_runs(session: WriteSession, run_ids: Sequence[int], sign: int) -> None:
    """Take these stored runs' terms out of their rollup rows (``sign=-1``) or put them
    back (``+1``), summed per key in SQL: one upsert for any number of runs. For a change
    of the runs' measurements in place (app/measurements): out, the update, back in; the
    run counts come back to what they were, so no row is dropped, and the variants'
    counts and newest starts stand (only their change counters move, see
    :func:`count_changes`). Keys are locked in order, as every writer does."""
    if not run_ids:
        return
    ids = sorted(run_ids)
    backend = dialect(session)
    chosen = in_ids_param(backend, Run.id, ids) & Run.id.between(ids[0], ids[-1])
    one = _recompute_select(backend).where(chosen).subquery()
    ins = upsert_insert(session, ROLLUP)
    rows = (
        select(*[one.c[k] for k in KEY], *[one.c[c] * sign for c in ("runs", *SUMS)])
        .where(one.c.week_start.is_not(None), one.c.month_start.is_not(None))
        .order_by(*[one.c[k] for k in KEY])
    )
    stmt = ins.from_select([*KEY, "runs", *SUMS], rows).on_conflict_do_update(
        index_elements=list(KEY),
        set_={c: ROLLUP.c[c] + ins.excluded[c] for c in ("runs", *SUMS)},
    )
    session.execute(stmt)


def count_changes(session: WriteSession, run_ids: Sequence[int]) -> None:
    """One change more on the variants of these runs: the values kept between requests
    (app/db/memo.py) are keyed by it, so they are recomputed."""
    if not run_ids:
        return
    ids = sorted(run_ids)
    touched = (
        select(Run.pipeline_id, Run.variant)
        .where(in_ids_param(dialect(session), Run.id, ids))
        .distinct()
        .order_by(Run.pipeline_id, Run.variant)
    )
    v = VARIANTS.c
    for pipeline_id, variant in session.execute(touched).all():
        session.execute(
            update(VARIANTS)
            .where(v.pipeline_id == pipeline_id, v.variant == variant)
            .values(changes=v.changes + 1)
        )


def count_note_changes(session: WriteSession, pipeline_id: int) -> None:
    """One change more on every variant of a pipeline whose change notes were written:
    the month's kept inputs hold its declared changes and are keyed by its change count,
    so a note declared, edited or deleted is read again (issue 34)."""
    v = VARIANTS.c
    session.execute(
        update(VARIANTS).where(v.pipeline_id == pipeline_id).values(changes=v.changes + 1)
    )
