"""Run queries: ingestion's dialect-specific inserts, and reading runs back."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from operator import methodcaller
from typing import Any, cast

from sqlalchemy import Select, Table, and_, func, insert, or_, select, tuple_
from sqlalchemy.orm import Session, selectinload

from app.db import rollup
from app.db.base import utcnow
from app.db.copy import copy_rows, copy_tuples, driver_cursor
from app.db.engine import WriteSession
from app.db.models import Interruption, Pipeline, Run, RunMeasurementChange
from app.db.sql import dialect, effective_price, in_ids, upsert_insert

RUN_TABLE = cast(Table, Run.__table__)
INTERRUPTION_TABLE = cast(Table, Interruption.__table__)


def measurements_changed(session: Session, run_pks: Sequence[int]) -> dict[int, set[str]]:
    """The fields of these runs changed since ingest (the measurement audit)."""
    rows = session.execute(
        select(RunMeasurementChange.run_pk, RunMeasurementChange.field)
        .where(RunMeasurementChange.run_pk.in_(list(run_pks)))
        .distinct()
    )
    out: dict[int, set[str]] = {}
    for pk, name in rows:
        out.setdefault(pk, set()).add(name)
    return out


def runs_by_key(session: Session, keys: Sequence[tuple[int, str]]) -> dict[tuple[int, str], Run]:
    if not keys:
        return {}
    rows = session.scalars(
        select(Run)
        .options(selectinload(Run.interruptions))
        .where(tuple_(Run.pipeline_id, Run.run_id).in_(list(keys)))
    )
    return {(r.pipeline_id, r.run_id): r for r in rows}


# Bulk inserts on PostgreSQL: COPY the batch into a temporary table, then one INSERT ...
# SELECT ... ON CONFLICT DO NOTHING RETURNING. Measured (pyinstrument, 1000-run batch): a
# multi-row VALUES list (~23 placeholders per run) spent most of its time re-parsing the
# statement, unnest() over arrays most of the rest dumping arrays; COPY's writer is C.
PG_TYPES = {
    "pipeline_id": "int4",
    "run_id": "text",
    "variant": "text",
    "started_at": "timestamptz",
    "finished_at": "timestamptz",
    "workers": "int4",
    "gpu_type": "text",
    "outcome": "text",
    "retraining_id": "text",
    "gpu_hours": "float8",
    "gpu_utilization": "float8",
    "utilization_source": "text",
    "price_per_gpu_hour": "float8",
    "billed_price_per_gpu_hour": "float8",
    "quality_metric": "text",
    "quality_value": "float8",
    "data_stall_hours": "float8",
    "checkpoint_hours": "float8",
    "scheduling_wait_hours": "float8",
    "mfu": "float8",
    "tags": "text",
    "interruption_count": "int4",
    "lost_progress_hours": "float8",
    "resume_hours": "float8",
    "reschedule_hours": "float8",
    "resumed_from_hours": "float8",
}
PG_INTERRUPTION_TYPES = {
    "run_pk": "int8",
    "position": "int4",
    "lost_progress_hours": "float8",
    "resume_hours": "float8",
    "reschedule_hours": "float8",
    "cause": "text",
}
BULK_THRESHOLD = 8
_RUN_COLUMNS = ", ".join(PG_TYPES)
_PG_STAGE = (
    "CREATE TEMP TABLE incoming_run ("
    + ", ".join(f"{c} {t}" for c, t in PG_TYPES.items())
    + ") ON COMMIT DROP"
)
_PG_MERGE = (
    f"INSERT INTO run ({_RUN_COLUMNS}, created_at) "
    f"SELECT {_RUN_COLUMNS.replace('tags', 'tags::json')}, %(created_at)s FROM incoming_run "
    "ORDER BY pipeline_id, run_id ON CONFLICT (pipeline_id, run_id) DO NOTHING "
    "RETURNING id, pipeline_id, run_id"
)


def _pg_insert_runs(
    session: WriteSession, values: list[dict[str, Any]], now: datetime
) -> list[Any]:
    with driver_cursor(session) as cursor:
        cursor.execute(_PG_STAGE)
        copy_rows(cursor, "incoming_run", PG_TYPES, copy_tuples(values, PG_TYPES))
        cursor.execute(_PG_MERGE, {"created_at": now})
        rows = list(cursor.fetchall())
        # Dropped now, not at commit: in tests a request is a savepoint of one transaction.
        cursor.execute("DROP TABLE incoming_run")
    return rows


def insert_runs(
    session: WriteSession, values: list[dict[str, Any]]
) -> dict[tuple[int, str], tuple[int, datetime]]:
    """Insert runs, skipping any whose (pipeline, run_id) exists: {key: (id, created_at)}."""
    if not values:
        return {}
    now = utcnow()
    if dialect(session) == "postgresql" and len(values) >= BULK_THRESHOLD:
        rows = _pg_insert_runs(session, values, now)
        return {(pid, rid): (pk, now) for pk, pid, rid in rows}
    table = RUN_TABLE  # Core, not the ORM bulk path: a third of the CPU per insert
    stmt = (
        upsert_insert(session, table)
        .on_conflict_do_nothing(index_elements=["pipeline_id", "run_id"])
        .returning(table.c.id, table.c.pipeline_id, table.c.run_id)
    )
    result = session.execute(stmt, [{**v, "created_at": now} for v in values])
    return {(pid, rid): (pk, now) for pk, pid, rid in result.all()}


_RUN_VALUE_COLUMNS = [c for c in PG_TYPES if c != "pipeline_id"]


def _pg_value(column: str) -> str:
    """The placeholder of one column in the one-statement insert. The billed price is
    frozen from the pipeline row the statement reads anyway: no extra round trip."""
    if column == "billed_price_per_gpu_hour":
        return "COALESCE(%(price_per_gpu_hour)s::float8, p.price_per_gpu_hour)"
    return f"%({column})s::{'json' if column == 'tags' else PG_TYPES[column]}"


_PG_INSERT_ONE = (
    "WITH p AS (SELECT id, name, price_per_gpu_hour, quality_metric FROM pipeline "
    "WHERE name = %(pipeline)s), "
    f"ins AS (INSERT INTO run (pipeline_id, {', '.join(_RUN_VALUE_COLUMNS)}, created_at) "
    "SELECT p.id, "
    + ", ".join(_pg_value(c) for c in _RUN_VALUE_COLUMNS)
    + ", %(created_at)s::timestamptz "
    "FROM p ON CONFLICT (pipeline_id, run_id) DO NOTHING "
    "RETURNING id, billed_price_per_gpu_hour AS price), "
    "brk AS (INSERT INTO interruption (run_pk, position, lost_progress_hours, resume_hours, "
    "reschedule_hours, cause) SELECT ins.id, t.* FROM ins, unnest(%(i_position)s::int4[], "
    "%(i_lost)s::float8[], %(i_resume)s::float8[], %(i_reschedule)s::float8[], "
    "%(i_cause)s::text[]) AS t)"
    + rollup.PG_UPSERT_CTE
    + "SELECT p.id, p.name, p.price_per_gpu_hour, p.quality_metric, (SELECT id FROM ins) FROM p"
)


def pg_insert_params(
    pipeline: str, values: dict[str, Any], interruptions: list[dict[str, Any]], now: datetime
) -> dict[str, Any]:
    """The parameters of ``_PG_INSERT_ONE`` (at most psycopg's 50 for its query cache)."""
    return {
        **{c: values[c] for c in _RUN_VALUE_COLUMNS if c != "billed_price_per_gpu_hour"},
        "tags": json.dumps(values["tags"]),
        "pipeline": pipeline,
        "created_at": now,
        "i_position": [i["position"] for i in interruptions],
        "i_lost": [float(i["lost_progress_hours"]) for i in interruptions],
        "i_resume": [float(i["resume_hours"]) for i in interruptions],
        "i_reschedule": [float(i["reschedule_hours"]) for i in interruptions],
        "i_cause": [i["cause"] for i in interruptions],
        **rollup.pg_upsert_params(values),
    }


def insert_one_pg(
    cursor: Any, pipeline: str, values: dict[str, Any], interruptions: list[Any]
) -> tuple[tuple[Any, ...], int | None, datetime] | None:
    """One run, its interruptions and its rollups in one statement (PostgreSQL), on a
    connection that commits it alone (``Database.one_statement``).

    None when the pipeline does not exist yet, else (the pipeline's id, name, price per
    GPU-hour and quality metric; the run's id; when it was stored). The run's id is None
    when the run_id exists already (a retry, or a conflict for the caller to name): then
    the statement wrote nothing. Measured: the single-run path spent most of its time on round trips
    and statement overhead.
    """
    now = utcnow()
    cursor.execute(_PG_INSERT_ONE, pg_insert_params(pipeline, values, interruptions, now))
    row = cursor.fetchone()
    if row is None:
        return None
    return tuple(row[:4]), row[4], now


def insert_interruptions(session: WriteSession, values: list[dict[str, Any]]) -> None:
    if not values:
        return
    if dialect(session) == "postgresql" and len(values) >= BULK_THRESHOLD:
        with driver_cursor(session) as cursor:
            copy_rows(
                cursor,
                "interruption",
                PG_INTERRUPTION_TYPES,
                copy_tuples(values, PG_INTERRUPTION_TYPES),
            )
        return
    session.execute(insert(INTERRUPTION_TABLE), values)


# Reading runs for the API: plain rows (Core), not ORM objects. 1000 runs as ORM objects
# with their pipeline and interruptions took ~55 ms; as rows they take a fraction.
_OUT_COLUMNS = (
    Run.id,
    Pipeline.name.label("pipeline"),
    Pipeline.price_per_gpu_hour.label("pipeline_price"),
    Pipeline.quality_metric.label("pipeline_metric"),
    Run.run_id,
    Run.variant,
    Run.started_at,
    Run.finished_at,
    Run.workers,
    Run.gpu_type,
    Run.outcome,
    Run.retraining_id,
    Run.gpu_utilization,
    Run.utilization_source,
    Run.gpu_hours,
    Run.price_per_gpu_hour,
    Run.billed_price_per_gpu_hour,
    Run.quality_metric,
    Run.quality_value,
    Run.data_stall_hours,
    Run.checkpoint_hours,
    Run.scheduling_wait_hours,
    Run.mfu,
    Run.tags,
    Run.created_at,
    Run.interruption_count,
    Run.resumed_from_hours,
)


_BREAK_COLUMNS = (
    Interruption.lost_progress_hours,
    Interruption.resume_hours,
    Interruption.reschedule_hours,
    Interruption.cause,
)


def _read(session: Session, stmt: Select[Any]) -> list[tuple[Any, list[Any]]]:
    """(run row, its interruption rows) for each run the statement selects, in order."""
    rows = list(session.execute(stmt))
    with_breaks = [r.id for r in rows if r.interruption_count]
    by_run: dict[int, list[Any]] = {}
    if with_breaks:
        match = in_ids(session, Interruption.run_pk, with_breaks)
        found = session.execute(
            select(Interruption.run_pk, *_BREAK_COLUMNS)
            .where(match)
            .order_by(Interruption.run_pk, Interruption.position)
        )
        for i in found:
            by_run.setdefault(i.run_pk, []).append(i)
    return [(r, by_run.get(r.id, [])) for r in rows]


def _runs_query() -> Select[Any]:
    return select(*_OUT_COLUMNS).join(Pipeline, Pipeline.id == Run.pipeline_id)


def earlier_attempt_hours(
    session: Session, pipeline_id: int, retraining_id: str, before: datetime
) -> float:
    """The summed wall clock (hours) of the retraining's finished attempts started before
    ``before`` (``ix_run_pipeline_retraining``): progress can be resumed only from them."""
    rows = session.execute(
        select(Run.started_at, Run.finished_at).where(
            Run.pipeline_id == pipeline_id,
            Run.retraining_id == retraining_id,
            Run.started_at < before,
            Run.finished_at.is_not(None),
        )
    )
    seconds = [(end - start).total_seconds() for start, end in rows if end is not None]
    return sum(seconds) / 3600.0


def run_pipeline_id(session: Session, pk: int) -> int | None:
    return session.scalar(select(RUN_TABLE.c.pipeline_id).where(RUN_TABLE.c.id == pk))


def delete_run(session: WriteSession, pk: int) -> None:
    """Delete a run (its interruptions follow by ON DELETE CASCADE) without reading it:
    a row stored before timestamps were range-checked may not load (year 10000). Its
    terms leave the rollups first: that reads the run's columns in SQL."""
    rollup.subtract_run(session, pk)
    session.execute(RUN_TABLE.delete().where(RUN_TABLE.c.id == pk))


def get_run(session: Session, pk: int) -> tuple[Any, list[Any]] | None:
    rows = _read(session, _runs_query().where(Run.id == pk))
    return rows[0] if rows else None


def pipeline_name(session: Session, pipeline_id: int) -> str:
    return session.execute(select(Pipeline.name).where(Pipeline.id == pipeline_id)).scalar_one()


def list_runs(
    session: Session,
    *,
    limit: int,
    pipeline_id: int | None = None,
    only: Sequence[str] | None = None,
    variant: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    after: tuple[datetime, int] | None = None,
) -> list[tuple[Any, list[Any]]]:
    """Newest first, keyset-paginated on (started_at, id); ``only``: these pipelines."""
    stmt = _runs_query()
    if pipeline_id is not None:
        stmt = stmt.where(Run.pipeline_id == pipeline_id)
    if only is not None:  # a token's pipeline limit
        stmt = stmt.where(Pipeline.name.in_(only))
    if variant is not None:
        stmt = stmt.where(Run.variant == variant)
    if since is not None:
        stmt = stmt.where(Run.started_at >= since)
    if until is not None:
        stmt = stmt.where(Run.started_at < until)
    if after is not None:
        started, pk = after
        stmt = stmt.where(
            or_(Run.started_at < started, and_(Run.started_at == started, Run.id < pk))
        )
    stmt = stmt.order_by(Run.started_at.desc(), Run.id.desc()).limit(limit)
    return _read(session, stmt)


# The runs table of the pipeline page: sortable columns (cost is computed, like the API's).
SORTS: dict[str, Any] = {
    "started_at": Run.started_at,
    "variant": Run.variant,
    "workers": Run.workers,
    "gpu_hours": Run.gpu_hours,
    "gpu_utilization": Run.gpu_utilization,
    "quality_value": Run.quality_value,
    "cost_usd": Run.gpu_hours * effective_price(),
}


def count_runs(session: Session, pipeline_id: int) -> int:
    return int(session.scalar(select(func.count()).where(Run.pipeline_id == pipeline_id)) or 0)


def sorted_runs(
    session: Session, pipeline_id: int, *, sort: str, descending: bool, offset: int, limit: int
) -> list[tuple[Any, list[Any]]]:
    """One page of a pipeline's runs in the order of ``SORTS[sort]`` (ties by id), joined
    to their interruptions in one statement."""
    key, way = SORTS[sort], methodcaller("desc" if descending else "asc")
    one = _runs_query().add_columns(key.label("sort_key")).where(Run.pipeline_id == pipeline_id)
    page = one.order_by(way(key), way(Run.id)).offset(offset).limit(limit).subquery()
    stmt = (
        select(*[c for c in page.c if c.name != "sort_key"], *_BREAK_COLUMNS)
        .outerjoin(Interruption, Interruption.run_pk == page.c.id)
        .order_by(way(page.c.sort_key), way(page.c.id), Interruption.position)
    )
    out: list[tuple[Any, list[Any]]] = []
    for row in session.execute(stmt):
        if not out or out[-1][0][0] != row.id:
            out.append((row[: len(_OUT_COLUMNS)], []))
        if row.lost_progress_hours is not None:  # the run had an interruption
            out[-1][1].append(row)
    return out
