"""Run queries. Dialect-specific upserts live here and nowhere else."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy import Select, and_, insert, or_, select, tuple_
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session, joinedload, selectinload

from app.db.models import Interruption, Pipeline, Run

SelectRuns = TypeVar("SelectRuns", bound=Select[Any])


def _insert(session: Session, table: Any) -> Any:
    dialect = session.get_bind().dialect.name
    return (postgresql.insert if dialect == "postgresql" else sqlite.insert)(table)


def ensure_pipelines(
    session: Session, names: Iterable[str], defaults: dict[str, dict[str, Any]]
) -> dict[str, Pipeline]:
    """Pipelines by name, creating missing ones; safe when two requests race."""
    wanted = sorted(set(names))
    found = {p.name: p for p in session.scalars(select(Pipeline).where(Pipeline.name.in_(wanted)))}
    missing = [n for n in wanted if n not in found]
    if missing:
        stmt = _insert(session, Pipeline).on_conflict_do_nothing(index_elements=["name"])
        session.execute(stmt, [defaults[n] for n in missing])
        rows = session.scalars(select(Pipeline).where(Pipeline.name.in_(missing)))
        found.update({p.name: p for p in rows})
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


def insert_runs(session: Session, values: list[dict[str, Any]]) -> dict[tuple[int, str], int]:
    """Insert runs, skipping any whose (pipeline, run_id) already exists. Returns new ids."""
    if not values:
        return {}
    stmt = (
        _insert(session, Run)
        .on_conflict_do_nothing(index_elements=["pipeline_id", "run_id"])
        .returning(Run.id, Run.pipeline_id, Run.run_id)
    )
    result = session.execute(stmt, values)
    return {(pid, rid): pk for pk, pid, rid in result.all()}


def insert_interruptions(session: Session, values: list[dict[str, Any]]) -> None:
    if values:
        session.execute(insert(Interruption), values)


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
