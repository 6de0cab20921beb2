"""Queries of the measurements endpoint: the runs to change, the change itself with the
rollups kept in step, and the audit rows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import insert, select, update
from sqlalchemy.orm import Session

from app.db import rollup
from app.db.engine import WriteSession
from app.db.models import Pipeline, Run, RunMeasurementChange


def pipeline_id(session: Session, name: str) -> int | None:
    return session.scalar(select(Pipeline.id).where(Pipeline.name == name))


def runs_by_run_id(session: WriteSession, pipeline: int, run_ids: Sequence[str]) -> dict[str, Run]:
    """The pipeline's runs with these run ids, locked (PostgreSQL) in id order."""
    rows = session.scalars(
        select(Run)
        .where(Run.pipeline_id == pipeline, Run.run_id.in_(list(run_ids)))
        .order_by(Run.id)
        .with_for_update()
    )
    return {row.run_id: row for row in rows}


def change_runs(session: WriteSession, values: dict[int, dict[str, Any]]) -> None:
    """Set these columns of these runs, and the rollups with them: the runs' old terms
    leave their rollup rows (summed in SQL from the stored rows), the rows change, and
    the new terms go back in; their variants count a change, which the values kept
    between requests are keyed by (app/db/memo.py)."""
    ids = sorted(values)
    rollup.shift_runs(session, ids, -1)
    for fields in _same_fields(values):
        session.execute(
            update(Run).execution_options(synchronize_session=False),
            [{"id": pk, **values[pk]} for pk in fields],
        )
    rollup.shift_runs(session, ids, +1)
    rollup.count_changes(session, ids)


def _same_fields(values: dict[int, dict[str, Any]]) -> list[list[int]]:
    """Run ids grouped by the set of columns they change (one executemany each)."""
    groups: dict[tuple[str, ...], list[int]] = {}
    for pk in sorted(values):
        groups.setdefault(tuple(sorted(values[pk])), []).append(pk)
    return list(groups.values())


def add_changes(session: WriteSession, rows: list[dict[str, Any]]) -> None:
    if rows:
        session.execute(insert(RunMeasurementChange), rows)


def changes_of(session: Session, run_pk: int) -> list[RunMeasurementChange]:
    return list(
        session.scalars(
            select(RunMeasurementChange)
            .where(RunMeasurementChange.run_pk == run_pk)
            .order_by(RunMeasurementChange.id)
        )
    )


def run_pk(session: Session, pipeline: int, run_id: str) -> int | None:
    return session.scalar(select(Run.id).where(Run.pipeline_id == pipeline, Run.run_id == run_id))
