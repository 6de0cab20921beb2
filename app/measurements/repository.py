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
    """Set these columns of these runs, and the rollups with them: each run's old terms
    leave its rollup row (read from the stored row, in SQL), the row changes, and its new
    terms are added back. Both steps also count a change of the run's variant, which the
    values kept between requests are keyed by (app/db/memo.py)."""
    ids = sorted(values)
    for pk in ids:
        rollup.subtract_run(session, pk)
        session.execute(update(Run).where(Run.id == pk).values(**values[pk]))
    rollup.add_runs(session, ids)


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
