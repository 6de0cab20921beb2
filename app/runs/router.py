from __future__ import annotations

from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Path, Query, Request, Response, status
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ValidationError
from pydantic_core import to_json
from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool

from app.alerts.service import evaluate_after_ingest, pipelines_with_rules
from app.auth.service import TokenInfo, check_pipeline_allowed
from app.db.engine import Database
from app.deps import Admin, DatabaseDep, Ingestor, SettingsDep, Viewer
from app.errors import Invalid
from app.pipelines.service import get_by_name
from app.runs import repository, service
from app.runs.schemas import BatchItem, BatchOut, RunBatchIn, RunIn, RunOut, RunPage
from app.schemas_common import Timestamp
from app.settings import Settings

router = APIRouter(prefix="/api/v1/runs", tags=["runs"])
M = TypeVar("M", bound=BaseModel)
# Ids are BIGINT: larger numbers are not ids (and would overflow the driver: found by fuzzing).
RunPk = Annotated[int, Path(ge=1, le=2**63 - 1, description="The run's id")]


def json_body(model: type[BaseModel]) -> dict[str, Any]:
    """OpenAPI for a body the endpoint reads itself (so /docs still shows its schema).

    Nested models are inlined: a ``#/$defs/...`` reference would not resolve inside
    the OpenAPI document.
    """
    schema = model.model_json_schema()
    defs = schema.pop("$defs", {})

    def inline(node: Any) -> Any:
        if isinstance(node, dict):
            ref = node.get("$ref", "")
            if ref.startswith("#/$defs/"):
                return inline(defs[ref.removeprefix("#/$defs/")])
            return {k: inline(v) for k, v in node.items()}
        if isinstance(node, list):
            return [inline(v) for v in node]
        return node

    content = {"application/json": {"schema": inline(schema)}}
    return {"requestBody": {"required": True, "content": content}}


@router.post(
    "",
    response_model=RunOut,
    status_code=status.HTTP_201_CREATED,
    responses={
        200: {"description": "An identical retry: the stored run"},
        409: {"description": "The run_id exists with different values"},
    },
    openapi_extra=json_body(RunIn),
)
async def post_run(
    request: Request, db: DatabaseDep, token: Ingestor, settings: SettingsDep
) -> Response:
    """Record one run. Safe to retry: the same (pipeline, run_id) and body returns 200.

    Parsing, storing and answering happen in one worker-thread hop; the body is
    validated from its bytes and the answer serialised once (see ``post_batch``).
    """
    raw = await request.body()
    return await run_in_threadpool(store_run, db, raw, token, settings)


def store_run(db: Database, raw: bytes, token: TokenInfo, settings: Settings) -> Response:
    run = parse_body(RunIn, raw)
    with db.transaction() as session:
        [result] = service.ingest(session, [run], token=token, settings=settings, batch=False)
        stored = service.created_out(result) if result.created else service.get(session, result.pk)
    code = status.HTTP_201_CREATED if result.created else status.HTTP_200_OK
    response = Response(stored.model_dump_json(), status_code=code, media_type="application/json")
    if result.created:  # alert rules of this pipeline, after the response is sent
        response.background = alert_task(db, settings, [run.pipeline])
    return response


def alert_task(db: Database, settings: Settings, names: list[str]) -> BackgroundTask | None:
    """Evaluate the alert rules of these pipelines after the response, if they have any."""
    with_rules = pipelines_with_rules(db, names)
    return BackgroundTask(evaluate_after_ingest, db, settings, with_rules) if with_rules else None


@router.post(
    "/batch",
    response_model=BatchOut,
    status_code=status.HTTP_201_CREATED,
    openapi_extra=json_body(RunBatchIn),
)
async def post_batch(
    request: Request, db: DatabaseDep, token: Ingestor, settings: SettingsDep
) -> Response:
    """Record up to `max_batch_runs` runs, all or nothing. Body: `{"runs": [...]}`.

    The body is validated straight from its bytes by pydantic-core (FastAPI would
    ``json.loads`` it and validate the Python objects: a third of a 1000-run batch's
    time), and the answer is serialised once.
    """
    raw = await request.body()
    batch = await run_in_threadpool(parse_body, RunBatchIn, raw)
    if len(batch.runs) > settings.max_batch_runs:
        raise Invalid(
            f"a batch holds at most {settings.max_batch_runs} runs; got {len(batch.runs)}",
            fields=[{"field": "runs", "reason": f"more than {settings.max_batch_runs} items"}],
        )
    body, task = await run_in_threadpool(store_batch_and_alert, db, batch, token, settings)
    code = status.HTTP_201_CREATED if body.created else status.HTTP_200_OK
    response = Response(body.model_dump_json(), status_code=code, media_type="application/json")
    response.background = task
    return response


def store_batch_and_alert(
    db: Database, batch: RunBatchIn, token: TokenInfo, settings: Settings
) -> tuple[BatchOut, BackgroundTask | None]:
    body = store_batch(db, batch, token, settings)
    names = sorted({r.pipeline for r in body.runs if r.status == "created"})
    return body, alert_task(db, settings, names)


def parse_body(model: type[M], raw: bytes) -> M:
    """Validate a JSON body from its bytes; errors read as FastAPI's own (a 422)."""
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        errors = [{**e, "loc": ("body", *e["loc"])} for e in exc.errors(include_url=False)]
        raise RequestValidationError(errors) from None


def store_batch(db: Database, batch: RunBatchIn, token: TokenInfo, settings: Settings) -> BatchOut:
    with db.transaction() as session:
        results = service.ingest(session, batch.runs, token=token, settings=settings, batch=True)
    created = sum(r.created for r in results)
    return BatchOut.model_construct(
        created=created,
        existing=len(results) - created,
        runs=[
            BatchItem.model_construct(
                index=r.index,
                id=r.pk,
                run_id=r.run.run_id,
                pipeline=r.run.pipeline,
                status="created" if r.created else "existing",
            )
            for r in results
        ],
    )


@router.get("", response_model=RunPage)
def list_runs(
    db: DatabaseDep,
    viewer: Viewer,
    pipeline: str | None = None,
    variant: str | None = None,
    since: Annotated[Timestamp | None, Query(description="started_at >= since")] = None,
    until: Annotated[Timestamp | None, Query(description="started_at < until")] = None,
    limit: Annotated[int, Query(ge=1, le=service.MAX_LIST_LIMIT)] = 100,
    cursor: str | None = None,
) -> Response:
    """Runs, newest first. Follow `next_cursor` for the next page."""
    after = service.decode_cursor(cursor) if cursor else None
    if pipeline:
        check_pipeline_allowed(viewer, pipeline)
    with db.transaction(write=False) as session:
        pipeline_id = get_by_name(session, pipeline).id if pipeline else None
        rows = repository.list_runs(
            session,
            pipeline_id=pipeline_id,
            only=viewer.pipelines if viewer is not None and not pipeline else None,
            variant=variant,
            since=since,
            until=until,
            after=after,
            limit=limit + 1,
        )
        page = rows[:limit]
        more = len(rows) > limit
        body = {
            "runs": [service.out_dict(*r) for r in page],
            "next_cursor": service.encode_cursor(page[-1][0]) if more and page else None,
        }
    # Serialised once, here, by pydantic-core: returning a model would make FastAPI dump
    # and re-validate up to 1000 runs (response_model still documents the shape).
    return Response(to_json(body), media_type="application/json")


@router.get("/{pk}", response_model=RunOut)
def get_run(pk: RunPk, db: DatabaseDep, viewer: Viewer) -> RunOut:
    with db.transaction(write=False) as session:
        return service.get(session, pk, viewer)


@router.delete("/{pk}", status_code=status.HTTP_204_NO_CONTENT)
def delete_run(pk: RunPk, db: DatabaseDep, token: Admin) -> Response:
    """Delete one run and its interruptions (admin)."""
    with db.transaction() as session:
        service.delete(session, pk, token)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
