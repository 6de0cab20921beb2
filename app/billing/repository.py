"""Bill line, run-holding and kept-total queries for the reconciliation.

The bill's totals kept at import (``bill_total``), read while no run write marked
their month moved (app/db/bill_marks.py): the reconciliation of a month with a
30,000-line bill then reads a row a pipeline, not the month's lines and the runs' held
resources (~1 s)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from datetime import date, datetime
from typing import Any, cast

from sqlalchemy import Table, delete, func, insert, or_, select, text, update
from sqlalchemy.orm import Session

from app.billing.reader import LineItem, Span
from app.db.bill_marks import RESOURCE_TAG, UNCLAIMED, holds, kept_stamp
from app.db.copy import copy_rows, copy_tuples, driver_cursor
from app.db.engine import WriteSession
from app.db.models import BillLine, BillTotal, Pipeline, Run, RunVariant
from app.db.sql import dialect
from app.planning.reconcile import Figures, Reconciliation
from app.planning.resource_ids import short_id

CHUNK = 500
LINE_TABLE = cast(Table, BillLine.__table__)
LINES_AT_ONCE = 2_000  # rows a reconciliation fetches at a time


LINE_VALUES = ("billed_cost", "effective_cost", "list_cost", "gpu_hours")
# The binary COPY types of a stored line: every column an import writes (a LineItem's
# fields, its file and its import; tests/billing/test_import_scaling.py holds them to
# the table's columns).
_FLOATS = (*LINE_VALUES, "gpus_per_unit")
_TIMES = ("charge_period_start", "charge_period_end")
PG_LINE_TYPES = {
    name: "float8" if name in _FLOATS else "timestamptz" if name in _TIMES else "text"
    for name in (*(f.name for f in fields(LineItem)), "source", "import_id")
}


@dataclass
class Stored:
    """What one import did to the stored lines (each counts lines: charges)."""

    new: int = 0
    same: int = 0  # stored already, by an earlier import, with the same figures
    changed: int = 0  # stored already, with other figures: the new ones replace them
    replaced: int = 0  # an earlier import's lines of the same resource and period,
    # in another shape (hourly against daily): removed, the new lines stand for them


def lock_imports(session: WriteSession) -> None:
    """One bill import at a time (PostgreSQL; SQLite's write lock already is one), so
    what each import counts as new is what it stored: two imports of one bill at once
    report 2,000 new and 2,000 already stored, not 2,000 new each.

    The import's statements are also planned for their values each time, never by a
    generic plan: psycopg prepares :func:`store_chunk`'s look-up after 5 runs, and
    PostgreSQL then kept the plan it made while this transaction's table was small, a
    sequential scan that compares each row with the 500 keys one by one. It grew with
    every chunk stored: 100,000 lines took 286 s, 305,000 did not finish in 19 min.
    Planned with its keys, the look-up hashes them or uses the row_key index."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text("SELECT pg_advisory_xact_lock(hashtext('cadence.bill_import'))"))
        session.execute(text("SET LOCAL plan_cache_mode = force_custom_plan"))


def store_chunk(
    session: WriteSession, import_id: str, source: str, lines: Sequence[LineItem], out: Stored
) -> None:
    """Store up to CHUNK lines as this import's: new charges inserted, charges stored
    before overwritten (and counted same or changed), a charge twice in the file summed."""
    merged: dict[str, dict[str, Any]] = {}
    for line in lines:
        # vars, not asdict: asdict's deep copies were a third of an import's time
        row = {**vars(line), "source": source[-300:], "import_id": import_id}
        if (found := merged.get(line.row_key)) is None:
            merged[line.row_key] = row
        else:
            _sum_into(found, row)
    columns = (
        BillLine.id,
        BillLine.row_key,
        BillLine.import_id,
        *(getattr(BillLine, c) for c in LINE_VALUES),
    )
    stored = {
        r.row_key: r for r in session.execute(select(*columns).where(BillLine.row_key.in_(merged)))
    }
    updates = []
    for key, row in merged.items():
        old = stored.get(key)
        if old is None:
            continue
        if old.import_id == import_id:  # the same charge earlier in this file
            _sum_into(row, {c: getattr(old, c) for c in LINE_VALUES})
        elif all(getattr(old, c) == row[c] for c in LINE_VALUES):
            out.same += 1
        else:
            out.changed += 1
        updates.append({**row, "id": old.id})
    inserts = [row for key, row in merged.items() if key not in stored]
    if updates:
        session.execute(update(BillLine), updates)
    if inserts:
        _insert_lines(session, inserts)
        out.new += len(inserts)


def _insert_lines(session: WriteSession, rows: list[dict[str, Any]]) -> None:
    """New lines: COPY on PostgreSQL (an executemany of 275,000 lines took 45 s), else
    an executemany of one cached statement (a VALUES list of 500 rows compiled anew
    each chunk was 80% of an import's time) into the table, not the ORM class: the
    ORM's bulk insert splits a chunk at every change of which values are None (a tag, a
    list cost), 4,300 executemany calls for 27,000 lines."""
    if dialect(session) == "postgresql":
        with driver_cursor(session) as cursor:
            copy_rows(cursor, "bill_line", PG_LINE_TYPES, copy_tuples(rows, PG_LINE_TYPES))
    else:
        session.execute(insert(LINE_TABLE), rows)


def _sum_into(row: dict[str, Any], more: dict[str, Any]) -> None:
    for c in LINE_VALUES:
        if row[c] is not None or more[c] is not None:
            row[c] = (row[c] or 0.0) + (more[c] or 0.0)


def replace_restated(
    session: WriteSession, import_id: str, spans: dict[tuple[str, str, str], Span]
) -> int:
    """Remove the lines of earlier imports that lie within the span this import covers
    for their resource (same provider and billing account): the import restates them."""
    removed = 0
    for (provider, account, resource), (start, end) in spans.items():
        result = session.execute(
            delete(BillLine).where(
                BillLine.resource_id == resource,
                BillLine.provider == provider,
                BillLine.billing_account_id == account,
                BillLine.charge_period_start >= start,
                BillLine.charge_period_end <= end,
                or_(BillLine.import_id.is_(None), BillLine.import_id != import_id),
            )
        )
        removed += int(getattr(result, "rowcount", 0) or 0)
    return removed


def lines_between(
    session: Session,
    start: datetime,
    end: datetime,
    *,
    resources: Sequence[str] | None = None,
    pipeline: str | None = None,
) -> Iterable[Any]:
    """The bill lines whose charge period overlaps [start, end); with ``resources``, only
    those of these resources or tagged for ``pipeline`` (one pipeline's page). Rows of
    the six columns the reconciliation reads, not whole lines, fetched LINES_AT_ONCE at
    a time (a server-side cursor on PostgreSQL) for the caller to go through once: the
    import of 90,000 lines held them all at once, 67 MB more at its peak."""
    b = BillLine
    statement = select(
        b.charge_period_start,
        b.charge_period_end,
        b.effective_cost,
        b.gpu_hours,
        b.resource_id,
        b.pipeline_tag,
    ).where(b.charge_period_start < end, b.charge_period_end > start)
    if resources is not None:
        # Every form that may join (app.planning.resource_ids), without case: a wider
        # read than the join, which the reconciliation narrows.
        named = sorted({k.lower() for r in resources for k in (r, short_id(r))})
        statement = statement.where(
            or_(
                func.lower(BillLine.resource_id).in_(named),
                func.lower(BillLine.resource_tail).in_(named),
                BillLine.pipeline_tag == pipeline,
            )
        )
    ordered = statement.order_by(BillLine.id)
    return session.execute(ordered, execution_options={"yield_per": LINES_AT_ONCE})


def holdings_between(session: Session, start: datetime, end: datetime) -> list[Any]:
    """(pipeline name, cloud_resource_id tag, started_at, finished_at, gpu_hours) of
    every run that names a cloud resource and overlaps [start, end)."""
    tag = Run.tags[RESOURCE_TAG].as_string()
    rows = session.execute(
        select(
            Pipeline.name, tag.label("resources"), Run.started_at, Run.finished_at, Run.gpu_hours
        )
        .join(Pipeline, Pipeline.id == Run.pipeline_id)
        .where(Run.started_at < end, Run.finished_at > start, tag.is_not(None))
    )
    return list(rows)


def latest_line_start(session: Session) -> datetime | None:
    value: datetime | None = session.scalar(select(func.max(BillLine.charge_period_start)))
    return value


def run_changes(session: Session) -> int:
    """Every variant's change counter summed: it moves with any run write, the key of a
    month reconciled from its lines when no totals of it were kept."""
    return int(session.scalar(select(func.coalesce(func.sum(RunVariant.changes), 0))) or 0)


def kept_totals(
    session: Session, month: date, only: str | None = None
) -> tuple[tuple[Reconciliation, dict[str, float]] | None, tuple[object, ...]]:
    """The month's kept figures and the GPU-hours the runs recorded, by pipeline (None
    when none were kept or a run of the month moved since, app/db/bill_marks.py: the
    caller reconciles again), and a key of what a reconciliation from the lines depends
    on now (the kept rows with their marks, which every import and every run write of
    the month that names a cloud resource rewrites)."""
    statement = select(BillTotal).where(BillTotal.month == month)
    if only is not None:
        statement = statement.where(BillTotal.pipeline.in_([only, UNCLAIMED]))
    rows = session.scalars(statement).all()
    key = tuple((r.pipeline, r.runs_stamp, r.billed_usd, r.lines) for r in rows)
    marks = [r.runs_stamp for r in rows if r.pipeline == UNCLAIMED]
    if not marks or not holds(marks[0]):
        return None, key or ("none", run_changes(session))
    out, recorded = Reconciliation(), {}
    for row in rows:
        figures = Figures(
            row.billed_usd,
            row.explained_usd,
            row.billed_gpu_hours,
            row.explained_gpu_hours,
            row.lines,
        )
        if row.pipeline == UNCLAIMED:
            out.unattributed = figures
        else:
            out.pipelines[row.pipeline] = figures
            recorded[row.pipeline] = row.recorded_gpu_hours
    return (out, recorded), key


def keep_totals(
    session: WriteSession, month: date, result: Reconciliation, recorded: dict[str, float]
) -> None:
    """Replace the month's kept figures with ``result`` (the runs as they are now: the
    caller holds :func:`app.db.bill_marks.lock_totals` since before it read them)."""
    stamp = kept_stamp()
    session.execute(delete(BillTotal).where(BillTotal.month == month))
    named = [(UNCLAIMED, result.unattributed), *result.pipelines.items()]
    session.add_all(
        BillTotal(
            month=month,
            pipeline=name,
            billed_usd=f.billed_usd,
            explained_usd=f.explained_usd,
            billed_gpu_hours=f.billed_gpu_hours,
            explained_gpu_hours=f.explained_gpu_hours,
            recorded_gpu_hours=recorded.get(name, 0.0),
            lines=f.lines,
            runs_stamp=stamp,
        )
        for name, f in named
    )
    session.flush()
