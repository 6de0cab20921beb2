"""Pipeline queries."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, cast

from sqlalchemy import BigInteger, Table, func, literal, select, union_all
from sqlalchemy.orm import Session

from app.db.engine import WriteSession
from app.db.models import ChangeNote, Pipeline, PipelineChange, RunVariant
from app.db.sql import upsert_insert


def by_name(session: Session, name: str) -> Pipeline | None:
    return session.scalar(select(Pipeline).where(Pipeline.name == name))


# What ingestion needs of a pipeline, as plain rows (cheaper than ORM objects).
_REF = select(Pipeline.id, Pipeline.name, Pipeline.price_per_gpu_hour, Pipeline.quality_metric)


def refs(session: Session, names: Sequence[str]) -> list[Any]:
    """(id, name, price per GPU-hour, quality metric) of the pipelines so named."""
    return list(session.execute(_REF.where(Pipeline.name.in_(names))))


def insert_new(session: WriteSession, values: list[dict[str, Any]]) -> None:
    """Insert pipelines, skipping any whose name exists: safe when two requests race."""
    stmt = upsert_insert(session, Pipeline.__table__).on_conflict_do_nothing(
        index_elements=["name"]
    )
    session.execute(stmt, values)


def run_stats(session: Session, ids: list[int]) -> dict[int, tuple[int, datetime | None]]:
    """Run count and latest start per pipeline id (from ``run_variant``, a row per variant)."""
    v = RunVariant
    rows = session.execute(
        select(v.pipeline_id, func.sum(v.runs), func.max(v.last_started_at))
        .where(v.pipeline_id.in_(ids), v.runs > 0)
        .group_by(v.pipeline_id)
    )
    return {pid: (int(n), last) for pid, n, last in rows}


def count(session: Session, *, only: Sequence[str] | None = None) -> int:
    stmt = select(func.count()).select_from(Pipeline)
    if only is not None:
        stmt = stmt.where(Pipeline.name.in_(only))
    return session.scalar(stmt) or 0


def page_after(
    session: Session, only: Sequence[str] | None, after: str | None, limit: int
) -> list[tuple[Pipeline, int, datetime | None]]:
    """Pipelines by name after ``after``, with their run count and latest start, both
    from ``run_variant`` (a row per variant; on 10M runs, probing the run table's index
    for each of 1,000 pipelines' latest start cost ~0.4 s)."""
    v = RunVariant
    mine = (v.pipeline_id == Pipeline.id) & (v.runs > 0)
    runs = select(func.coalesce(func.sum(v.runs), 0)).where(mine).scalar_subquery()
    last = select(func.max(v.last_started_at)).where(mine).scalar_subquery()
    stmt: Any = select(Pipeline, runs, last).order_by(Pipeline.name).limit(limit)
    if only is not None:
        stmt = stmt.where(Pipeline.name.in_(only))
    if after is not None:
        stmt = stmt.where(Pipeline.name > after)
    return [(p, int(n), t) for p, n, t in session.execute(stmt)]


def by_names(
    session: Session,
    *,
    offset: int = 0,
    limit: int | None = None,
    only: Sequence[str] | None = None,
    owner: str | None = None,
) -> list[Pipeline]:
    """Pipelines in name order, optionally one page of them; ``only``: these names;
    ``owner``: of this team."""
    stmt = select(Pipeline).order_by(Pipeline.name).offset(offset)
    if only is not None:
        stmt = stmt.where(Pipeline.name.in_(only))
    if owner is not None:
        stmt = stmt.where(Pipeline.owner == owner)
    if limit is not None:
        stmt = stmt.limit(limit)
    return list(session.scalars(stmt))


# Table columns, not ORM attributes, fetched with .all(): the rows skip the ORM's
# loading and the row-at-a-time fetch (5,000 pipelines: ~10 ms of CPU, not ~19).
PIPELINE_TABLE = cast(Table, Pipeline.__table__)
BRIEF_COLUMNS = tuple(
    PIPELINE_TABLE.c[name]
    for name in (
        "id",
        "name",
        "display_name",
        "owner",
        "monthly_budget_usd",
        "price_per_gpu_hour",
        "production_variant",
        "runs_per_week",
        # The gate's settings and the descriptions: what an overview card shows and is
        # kept under, so the portfolio's one listing serves its cards too.
        "quality_metric",
        "higher_is_better",
        "gate_cost_basis",
        "gate_power",
        "quality_value_usd_per_unit_month",
        "variant_descriptions",
        "quality_margin",
    )
)


def briefs(
    session: Session, *, only: Sequence[str] | None = None, owner: str | None = None
) -> list[Any]:
    """The columns of :data:`BRIEF_COLUMNS` of every pipeline (``only``: these names;
    ``owner``: of this team), in name order, as plain rows (no ORM objects)."""
    c = PIPELINE_TABLE.c
    stmt = select(*BRIEF_COLUMNS).order_by(c.name)
    if only is not None:
        stmt = stmt.where(c.name.in_(only))
    if owner is not None:
        stmt = stmt.where(c.owner == owner)
    return list(session.execute(stmt).all())


def created_by_token_since(session: Session, token_id: int, since: datetime) -> list[datetime]:
    """When the pipelines this token created since ``since`` were created, oldest first."""
    stmt = (
        select(Pipeline.created_at)
        .where(Pipeline.created_by_token_id == token_id, Pipeline.created_at >= since)
        .order_by(Pipeline.created_at)
    )
    return list(session.scalars(stmt))


def owners(session: Session, *, only: Sequence[str] | None = None) -> list[str]:
    """The distinct non-empty owners (teams) of the pipelines, sorted."""
    stmt = select(Pipeline.owner).where(Pipeline.owner != "").distinct()
    if only is not None:
        stmt = stmt.where(Pipeline.name.in_(only))
    return sorted(session.scalars(stmt))


def recent_changes(session: Session, pipeline_id: int, limit: int) -> list[PipelineChange]:
    """The pipeline's latest settings changes, newest first."""
    stmt = (
        select(PipelineChange)
        .where(PipelineChange.pipeline_id == pipeline_id)
        .order_by(PipelineChange.created_at.desc(), PipelineChange.id.desc())
        .limit(limit)
    )
    return list(session.scalars(stmt))


def notes(session: Session, pipeline_id: int) -> list[ChangeNote]:
    """The pipeline's declared change notes, oldest first."""
    stmt = (
        select(ChangeNote)
        .where(ChangeNote.pipeline_id == pipeline_id)
        .order_by(ChangeNote.at, ChangeNote.id)
    )
    return list(session.scalars(stmt))


def note(session: Session, pipeline_id: int, note_id: int) -> ChangeNote | None:
    return session.scalar(
        select(ChangeNote).where(ChangeNote.pipeline_id == pipeline_id, ChangeNote.id == note_id)
    )


def same_note(session: Session, pipeline_id: int, at: datetime, text: str) -> ChangeNote | None:
    """The note already declared with this instant and text (a retry), if any."""
    return session.scalar(
        select(ChangeNote).where(
            ChangeNote.pipeline_id == pipeline_id,
            ChangeNote.at == at,
            ChangeNote.description == text,
        )
    )


def insert_note(session: WriteSession, values: dict[str, Any]) -> bool:
    """Insert a note unless the same (pipeline, at, description) exists; True if stored.
    One statement, so two identical posts racing store one row and neither fails."""
    stmt = (
        upsert_insert(session, ChangeNote.__table__)
        .on_conflict_do_nothing(index_elements=["pipeline_id", "at", "description"])
        .returning(ChangeNote.id)  # a row back only if inserted (rowcount is -1 here)
    )
    return session.execute(stmt, values).first() is not None


def change_rows(session: Session, pipeline_id: int) -> list[Any]:
    """The declared notes and the changes of the price setting (not its first setting),
    as rows (kind, at, description, by, id), in one statement: the page reads them with
    everything else and a statement more is a round trip more."""
    declared = select(
        literal("declared").label("kind"),
        ChangeNote.at,
        ChangeNote.description,
        ChangeNote.created_by.label("by"),
        ChangeNote.id,
    ).where(ChangeNote.pipeline_id == pipeline_id)
    priced = select(
        literal("price").label("kind"),
        PipelineChange.created_at,
        (
            "price changed from $"
            + PipelineChange.old_value
            + " to $"
            + PipelineChange.new_value
            + " per GPU-hour"
        ),
        PipelineChange.changed_by,
        literal(None, BigInteger),
    ).where(
        PipelineChange.pipeline_id == pipeline_id,
        PipelineChange.field == "price_per_gpu_hour",
        PipelineChange.old_value.is_not(None),
    )
    return list(session.execute(union_all(declared, priced)))
