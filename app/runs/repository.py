"""Run queries. Dialect-specific upserts live here and nowhere else."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar, cast

from sqlalchemy import Select, Table, and_, insert, or_, select, tuple_
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session, joinedload, selectinload

from app.db.base import utcnow
from app.db.models import Interruption, Pipeline, Run

SelectRuns = TypeVar("SelectRuns", bound=Select[Any])


def _insert(session: Session, table: Any) -> Any:
    dialect = session.get_bind().dialect.name
    return (postgresql.insert if dialect == "postgresql" else sqlite.insert)(table)


@dataclass(frozen=True)
class PipelineRef:
    """What ingestion needs of a pipeline (a plain row, not an ORM object: cheaper)."""

    id: int
    name: str
    price_per_gpu_hour: float
    quality_metric: str


RUN_TABLE = cast(Table, Run.__table__)
INTERRUPTION_TABLE = cast(Table, Interruption.__table__)
_PIPELINE_REF = select(
    Pipeline.id, Pipeline.name, Pipeline.price_per_gpu_hour, Pipeline.quality_metric
)


def ensure_pipelines(
    session: Session, names: Iterable[str], defaults: dict[str, dict[str, Any]]
) -> dict[str, PipelineRef]:
    """Pipelines by name, creating missing ones; safe when two requests race."""
    wanted = sorted(set(names))
    found = {
        r.name: PipelineRef(*r)
        for r in session.execute(_PIPELINE_REF.where(Pipeline.name.in_(wanted)))
    }
    missing = [n for n in wanted if n not in found]
    if missing:
        stmt = _insert(session, Pipeline.__table__).on_conflict_do_nothing(index_elements=["name"])
        session.execute(stmt, [defaults[n] for n in missing])
        rows = session.execute(_PIPELINE_REF.where(Pipeline.name.in_(missing)))
        found.update({r.name: PipelineRef(*r) for r in rows})
    return found


def runs_by_key(session: Session, keys: Sequence[tuple[int, str]]) -> dict[tuple[int, str], Run]:
    if not keys:
        return {}
    rows = session.scalars(
        select(Run)
        .options(selectinload(Run.interruptions))
        .where(tuple_(Run.pipeline_id, Run.run_id).in_(list(keys)))
    )
    return {(r.pipeline_id, r.run_id): r for r in rows}


def insert_runs(
    session: Session, values: list[dict[str, Any]]
) -> dict[tuple[int, str], tuple[int, datetime]]:
    """Insert runs, skipping any whose (pipeline, run_id) exists: {key: (id, created_at)}."""
    if not values:
        return {}
    now = utcnow()
    table = RUN_TABLE  # Core, not the ORM bulk path: a third of the CPU per insert
    stmt = (
        _insert(session, table)
        .on_conflict_do_nothing(index_elements=["pipeline_id", "run_id"])
        .returning(table.c.id, table.c.pipeline_id, table.c.run_id)
    )
    result = session.execute(stmt, [{**v, "created_at": now} for v in values])
    return {(pid, rid): (pk, now) for pk, pid, rid in result.all()}


def insert_interruptions(session: Session, values: list[dict[str, Any]]) -> None:
    if values:
        session.execute(insert(INTERRUPTION_TABLE), values)


def load_runs(session: Session, ids: Sequence[int]) -> list[Run]:
    rows = session.scalars(_with_relations(select(Run)).where(Run.id.in_(list(ids))))
    by_id = {r.id: r for r in rows}
    return [by_id[i] for i in ids if i in by_id]


def get_run(session: Session, pk: int) -> Run | None:
    return session.scalar(_with_relations(select(Run)).where(Run.id == pk))


def list_runs(
    session: Session,
    *,
    pipeline_id: int | None,
    variant: str | None,
    since: datetime | None,
    until: datetime | None,
    after: tuple[datetime, int] | None,
    limit: int,
) -> list[Run]:
    """Newest first, keyset-paginated on (started_at, id)."""
    stmt = _with_relations(select(Run))
    if pipeline_id is not None:
        stmt = stmt.where(Run.pipeline_id == pipeline_id)
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
    return list(session.scalars(stmt))


def _with_relations(stmt: SelectRuns) -> SelectRuns:
    return stmt.options(joinedload(Run.pipeline), selectinload(Run.interruptions))
