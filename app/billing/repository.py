"""Bill line and run-holding queries for the reconciliation."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from datetime import datetime
from typing import Any

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from app.billing.reader import LineItem
from app.db.engine import WriteSession
from app.db.models import BillLine, Pipeline, Run
from app.db.sql import upsert_insert
from app.planning.resource_ids import short_id

CHUNK = 500
RESOURCE_TAG = "cloud_resource_id"


def store_lines(session: WriteSession, source: str, lines: Sequence[LineItem]) -> int:
    """Insert the lines not stored yet (by ``row_key``); returns how many were new."""
    created = 0
    for offset in range(0, len(lines), CHUNK):
        chunk = {line.row_key: line for line in lines[offset : offset + CHUNK]}
        known = set(session.scalars(select(BillLine.row_key).where(BillLine.row_key.in_(chunk))))
        rows = [{**asdict(line), "source": source[-300:]} for k, line in chunk.items()
                if k not in known]  # fmt: skip
        if rows:
            statement = upsert_insert(session, BillLine).values(rows)
            session.execute(statement.on_conflict_do_nothing(index_elements=["row_key"]))
            created += len(rows)
    return created


def lines_between(
    session: Session,
    start: datetime,
    end: datetime,
    *,
    resources: Sequence[str] | None = None,
    pipeline: str | None = None,
) -> Sequence[BillLine]:
    """The bill lines whose charge period overlaps [start, end); with ``resources``, only
    those of these resources or tagged for ``pipeline`` (one pipeline's page)."""
    statement = select(BillLine).where(
        BillLine.charge_period_start < end, BillLine.charge_period_end > start
    )
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
    return session.scalars(statement.order_by(BillLine.id)).all()


def holdings_between(session: Session, start: datetime, end: datetime) -> list[Any]:
    """(pipeline name, cloud_resource_id tag, started_at, finished_at) of every run that
    names a cloud resource and overlaps [start, end)."""
    tag = Run.tags[RESOURCE_TAG].as_string()
    rows = session.execute(
        select(Pipeline.name, tag.label("resources"), Run.started_at, Run.finished_at)
        .join(Pipeline, Pipeline.id == Run.pipeline_id)
        .where(Run.started_at < end, Run.finished_at > start, tag.is_not(None))
    )
    return list(rows)


def latest_line_start(session: Session) -> datetime | None:
    value: datetime | None = session.scalar(select(func.max(BillLine.charge_period_start)))
    return value
