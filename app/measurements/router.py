"""PATCH /api/v1/pipelines/{name}/runs/{run_id}/measurements and its batch form,
POST /api/v1/pipelines/{name}/measurements (ingest or admin scope); the audit of what
changed, GET /api/v1/pipelines/{name}/runs/{run_id}/measurement-changes (readers)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request
from starlette.concurrency import run_in_threadpool

from app.auth.service import TokenInfo
from app.db.engine import Database
from app.deps import DatabaseDep, Ingestor, ReadablePipeline
from app.measurements import service
from app.measurements.schemas import (
    MeasurementBatchIn,
    MeasurementChangesOut,
    MeasurementsIn,
    MeasurementsOut,
)
from app.runs.router import json_body, parse_body
from app.schemas_common import IDENTIFIER_PATTERN, SLUG_PATTERN, slug_or_422

router = APIRouter(prefix="/api/v1/pipelines", tags=["runs"])
NamePath = Annotated[
    str,
    Path(description="Pipeline slug", max_length=63, json_schema_extra={"pattern": SLUG_PATTERN}),
]
RunIdPath = Annotated[
    str,
    Path(
        description="The run's run_id",
        max_length=200,
        json_schema_extra={"pattern": IDENTIFIER_PATTERN},
    ),
]


@router.patch(
    "/{name}/runs/{run_id}/measurements",
    response_model=MeasurementsOut,
    openapi_extra=json_body(MeasurementsIn),
)
async def patch_measurements(
    name: NamePath, run_id: RunIdPath, request: Request, db: DatabaseDep, token: Ingestor
) -> MeasurementsOut:
    """Change a stored run's measurements: only the fields sent (utilization and its
    source, MFU, stall and checkpoint hours). Audited; the rollups follow."""
    slug_or_422(name, "name")
    sent = await run_in_threadpool(parse_body, MeasurementsIn, await request.body())
    return await run_in_threadpool(_store, db, name, [(run_id, sent)], token, True)


@router.post(
    "/{name}/measurements",
    response_model=MeasurementsOut,
    openapi_extra=json_body(MeasurementBatchIn),
)
async def post_measurements(
    name: NamePath, request: Request, db: DatabaseDep, token: Ingestor
) -> MeasurementsOut:
    """The batch form: up to 1000 runs of one pipeline, all or nothing (an unknown
    run_id is a 422 naming it)."""
    slug_or_422(name, "name")
    batch = await run_in_threadpool(parse_body, MeasurementBatchIn, await request.body())
    edits: list[tuple[str, MeasurementsIn]] = [(item.run_id, item) for item in batch.runs]
    return await run_in_threadpool(_store, db, name, edits, token, False)


def _store(
    db: Database,
    name: str,
    edits: list[tuple[str, MeasurementsIn]],
    token: TokenInfo,
    single: bool,
) -> MeasurementsOut:
    with db.write() as session:
        return service.update(session, name, edits, token, single=single)


@router.get("/{name}/runs/{run_id}/measurement-changes", response_model=MeasurementChangesOut)
def measurement_changes(
    name: ReadablePipeline, run_id: RunIdPath, db: DatabaseDep
) -> MeasurementChangesOut:
    """What changed in the run's measurements since ingest (``cadence enrich``, PATCHes):
    each field's old and new value, who changed it and when, oldest first."""
    with db.read() as session:
        return service.changes(session, name, run_id)
