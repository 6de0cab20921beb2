"""POST and GET /api/v1/pipelines/{name}/evaluations."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Request, Response, status
from starlette.concurrency import run_in_threadpool

from app.auth.service import TokenInfo
from app.db.engine import Database
from app.deps import DatabaseDep, Ingestor, ReadablePipeline, SettingsDep
from app.evaluations import service
from app.evaluations.schemas import EvaluationBatchIn, EvaluationBatchOut, EvaluationPage
from app.exceptions import Invalid
from app.runs.router import json_body, parse_body
from app.schemas_common import SLUG_PATTERN, slug_or_422

router = APIRouter(prefix="/api/v1/pipelines", tags=["evaluations"])
NamePath = Annotated[
    str,
    Path(description="Pipeline slug", max_length=63, json_schema_extra={"pattern": SLUG_PATTERN}),
]


@router.post(
    "/{name}/evaluations",
    response_model=EvaluationBatchOut,
    status_code=status.HTTP_201_CREATED,
    responses={
        200: {"description": "Every evaluation was already stored with these values"},
        409: {"description": "An evaluation exists with a different value"},
    },
    openapi_extra=json_body(EvaluationBatchIn),
)
async def post_evaluations(
    name: NamePath, request: Request, db: DatabaseDep, token: Ingestor, settings: SettingsDep
) -> Response:
    """Record up to `max_batch_runs` evaluations of the serving model, all or nothing.

    Idempotent on (pipeline, run_id, evaluated_at, metric): the same body again is 200.
    """
    slug_or_422(name, "name")
    raw = await request.body()
    batch = await run_in_threadpool(parse_body, EvaluationBatchIn, raw)
    if len(batch.evaluations) > settings.max_batch_runs:
        raise Invalid(
            f"a request holds at most {settings.max_batch_runs} evaluations; "
            f"got {len(batch.evaluations)}",
            fields=[{"field": "evaluations", "reason": f"more than {settings.max_batch_runs}"}],
        )
    body = await run_in_threadpool(_store, db, name, batch, token)
    code = status.HTTP_201_CREATED if body.created else status.HTTP_200_OK
    return Response(body.model_dump_json(), status_code=code, media_type="application/json")


def _store(
    db: Database, name: str, batch: EvaluationBatchIn, token: TokenInfo
) -> EvaluationBatchOut:
    with db.write() as session:
        return service.ingest(session, name, batch.evaluations, token=token)


@router.get("/{name}/evaluations", response_model=EvaluationPage)
def list_evaluations(
    name: ReadablePipeline,
    db: DatabaseDep,
    run_id: Annotated[str | None, Query(max_length=200)] = None,
    limit: Annotated[int, Query(ge=1, le=service.MAX_LIST_LIMIT)] = 100,
    cursor: str | None = None,
) -> EvaluationPage:
    """Evaluations, newest first. Follow `next_cursor` for the next page."""
    with db.read() as session:
        return service.list_page(session, name, run_id=run_id, cursor=cursor, limit=limit)
