"""Pipelines and their settings (admin writes), and the change points of their costs."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Response

from app.deps import (
    Admin,
    AdminPipeline,
    DatabaseDep,
    Ingestor,
    IngestPipeline,
    ReadablePipeline,
    SettingsDep,
    Viewer,
)
from app.pipelines import changes, notes, service
from app.pipelines.schemas import (
    ChangeNoteIn,
    ChangePointList,
    ChangePointOut,
    PipelineList,
    PipelineOut,
    PipelineUpdate,
)
from app.schemas_common import slug_or_422

MAX_PAGE = 1000
router = APIRouter(prefix="/api/v1/pipelines", tags=["pipelines"])


@router.get("", response_model=PipelineList)
def list_pipelines(
    db: DatabaseDep,
    viewer: Viewer,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = MAX_PAGE,
    cursor: Annotated[str | None, Query(max_length=400)] = None,
) -> PipelineList:
    """The pipelines the token may see (its `--pipeline` limit, if it has one), by name,
    a page at a time: `total` counts all of them, `next_cursor` fetches the next page."""
    only = viewer.pipelines if viewer is not None else None
    with db.read() as session:
        return service.list_page(session, only=only, cursor=cursor, limit=limit)


@router.get("/{name}", response_model=PipelineOut)
def get_pipeline(db: DatabaseDep, name: ReadablePipeline) -> PipelineOut:
    """One pipeline's settings."""
    with db.read() as session:
        return service.describe(session, name)


@router.put("/{name}", response_model=PipelineOut)
def put_pipeline(
    update: PipelineUpdate,
    db: DatabaseDep,
    settings: SettingsDep,
    token: Admin,  # the same (cached) dependency AdminPipeline checked
    name: AdminPipeline,
) -> PipelineOut:
    """Create or change a pipeline's price, budget, cadence and quality settings (admin)."""
    slug_or_422(name, "name")
    with db.write() as session:
        row, _ = changes.apply(session, name, update, settings, token)
        return service.describe(session, row.name)


NoteId = Annotated[int, Path(ge=1, le=2**63 - 1, description="The change note's id")]


@router.get("/{name}/changes", response_model=ChangePointList)
def list_changes(db: DatabaseDep, name: ReadablePipeline) -> ChangePointList:
    """The pipeline's change points, oldest first: the changes declared (notes) and the
    changes of its price setting. The bill's forecast starts after the latest."""
    with db.read() as session:
        points = notes.change_points(session, service.get_by_name(session, name))
    return ChangePointList(changes=[ChangePointOut.model_validate(p) for p in points])


@router.post(
    "/{name}/changes",
    response_model=ChangePointOut,
    status_code=201,
    responses={200: {"description": "The same note was declared before (a retry)"}},
)
def declare_change(
    note: ChangeNoteIn,
    response: Response,
    db: DatabaseDep,
    settings: SettingsDep,
    token: Ingestor,
    name: IngestPipeline,
) -> ChangePointOut:
    """Declare a change of the pipeline's costs (an optimization landed, the data grew):
    the forecast starts after it. Ingest or admin token. Posting the same `at` and
    `description` again answers 200 with the note stored first."""
    with db.write() as session:
        pipeline = service.get_by_name(session, name)
        stored, created = notes.declare(
            session,
            pipeline,
            note,
            token.name,
            tolerance_hours=settings.run_future_tolerance_hours,
        )
        out = notes.out(stored)
    if not created:
        response.status_code = 200
    return out


@router.put("/{name}/changes/{note_id}", response_model=ChangePointOut)
def edit_change(
    note_id: NoteId,
    note: ChangeNoteIn,
    db: DatabaseDep,
    settings: SettingsDep,
    token: Admin,
    name: AdminPipeline,
) -> ChangePointOut:
    """Change a declared note's time or text (admin); recorded in the settings history."""
    with db.write() as session:
        pipeline = service.get_by_name(session, name)
        stored = notes.edit(
            session,
            pipeline,
            note_id,
            note,
            token.name,
            tolerance_hours=settings.run_future_tolerance_hours,
        )
        return notes.out(stored)


@router.delete("/{name}/changes/{note_id}", status_code=204)
def delete_change(note_id: NoteId, db: DatabaseDep, token: Admin, name: AdminPipeline) -> Response:
    """Delete a declared note (admin); recorded in the settings history."""
    with db.write() as session:
        notes.delete(session, service.get_by_name(session, name), note_id, token.name)
    return Response(status_code=204)
