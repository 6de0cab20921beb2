from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from app.deps import Admin, AdminPipeline, DatabaseDep, ReadablePipeline, SettingsDep, Viewer
from app.pipelines import changes, service
from app.pipelines.schemas import PipelineList, PipelineOut, PipelineUpdate
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
