"""Change points of a pipeline's costs: notes people declare ("async checkpoints landed")
and changes of the price setting. The bill's forecast starts after the latest one
(docs/methodology.md); the cost and goodput charts mark them.

A note is declared by an ingest or admin token (``POST /api/v1/pipelines/{name}/changes``)
and edited or deleted by an admin (the API or the page ``/pipelines/{name}/changes``);
every edit and deletion is in the settings history with who made it.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy.orm import Session

from app.db import rollup
from app.db.engine import WriteSession
from app.db.models import ChangeNote, Pipeline
from app.exceptions import Conflict, Invalid, NotFound
from app.pipelines import changes, repository
from app.pipelines.schemas import ChangeNoteIn, ChangePointOut
from app.pipelines.service import ChangePoint, change_points

DECLARED = "declared"
__all__ = ["ChangePoint", "change_points", "declare", "delete", "edit", "out"]
AUDIT_FIELD = "change_note"


def _check_time(note: ChangeNoteIn, tolerance_hours: float, now: datetime) -> None:
    """A change declared for later than the clock allows a run to start is refused: the
    forecast cannot start after a change that has not happened."""
    if note.at > now + timedelta(hours=tolerance_hours):
        reason = (
            f"must not be more than {tolerance_hours:g} h ahead of now ({now:%Y-%m-%d %H:%M} UTC)"
        )
        raise Invalid(f"at: {reason}", fields=[{"field": "at", "reason": reason}])


def declare(
    session: WriteSession,
    pipeline: Pipeline,
    note: ChangeNoteIn,
    who: str,
    *,
    tolerance_hours: float,
    now: datetime | None = None,
) -> tuple[ChangeNote, bool]:
    """Store a note; a retry (same instant and text) is the stored note. Returns the note
    and whether it is new."""
    _check_time(note, tolerance_hours, now or datetime.now(UTC))
    values = {
        "pipeline_id": pipeline.id,
        "at": note.at,
        "description": note.description,
        "created_by": who,
    }
    created = repository.insert_note(session, values)
    stored = repository.same_note(session, pipeline.id, note.at, note.description)
    assert stored is not None  # inserted now or by the request it repeats
    if created:
        rollup.count_note_changes(session, pipeline.id)
    return stored, created


def _owned(session: Session, pipeline: Pipeline, note_id: int) -> ChangeNote:
    found = repository.note(session, pipeline.id, note_id)
    if found is None:
        raise NotFound(f"pipeline {pipeline.name!r} has no change note {note_id}")
    return found


def _shown(note: ChangeNote) -> str:
    return f"{note.at:%Y-%m-%d %H:%M} UTC: {note.description}"


def edit(
    session: WriteSession,
    pipeline: Pipeline,
    note_id: int,
    update: ChangeNoteIn,
    who: str,
    *,
    tolerance_hours: float,
) -> ChangeNote:
    """Change a note's instant or text (admin), recorded in the settings history."""
    _check_time(update, tolerance_hours, datetime.now(UTC))
    found = _owned(session, pipeline, note_id)
    twin = repository.same_note(session, pipeline.id, update.at, update.description)
    if twin is not None and twin.id != found.id:
        raise Conflict(f"change note {twin.id} already says this at this time")
    before = _shown(found)
    found.at, found.description = update.at, update.description
    session.flush()
    rollup.count_note_changes(session, pipeline.id)
    changes.record(session, pipeline.id, who, AUDIT_FIELD, before, _shown(found))
    return found


def delete(session: WriteSession, pipeline: Pipeline, note_id: int, who: str) -> None:
    """Delete a note (admin), recorded in the settings history."""
    found = _owned(session, pipeline, note_id)
    before = _shown(found)
    session.delete(found)
    session.flush()
    rollup.count_note_changes(session, pipeline.id)
    changes.record(session, pipeline.id, who, AUDIT_FIELD, before, None)


def out(note: ChangeNote) -> ChangePointOut:
    """A stored note as the API shows it."""
    return ChangePointOut(
        id=note.id, kind=DECLARED, at=note.at, description=note.description, by=note.created_by
    )
