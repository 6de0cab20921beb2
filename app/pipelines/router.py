from __future__ import annotations

from fastapi import APIRouter, Path

from app.deps import Admin, DatabaseDep, SettingsDep
from app.pipelines import service
from app.pipelines.schemas import PipelineList, PipelineOut, PipelineUpdate
from app.schemas_common import slug_or_422

router = APIRouter(prefix="/api/v1/pipelines", tags=["pipelines"])
NamePath = Path(description="Pipeline slug", max_length=63)


@router.get("", response_model=PipelineList)
def list_pipelines(db: DatabaseDep) -> PipelineList:
    with db.read() as session:
        return PipelineList(pipelines=service.list_all(session))


@router.get("/{name}", response_model=PipelineOut)
def get_pipeline(db: DatabaseDep, name: str = NamePath) -> PipelineOut:
    with db.read() as session:
        return service.describe(session, name)


@router.put("/{name}", response_model=PipelineOut)
def put_pipeline(
    update: PipelineUpdate,
    db: DatabaseDep,
    settings: SettingsDep,
    _token: Admin,
    name: str = NamePath,
) -> PipelineOut:
    """Create or change a pipeline's price, budget, cadence and quality settings (admin)."""
    slug_or_422(name, "name")
    with db.write() as session:
        row = service.upsert(session, name, update, settings)
        return service.describe(session, row.name)
