"""The runs API: ingest one run or a batch (the hot paths, which read their own bytes:
ARCHITECTURE.md; a running attempt is finished by posting it again), list, read and
delete runs."""

from __future__ import annotations

from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Path, Query, Request, Response, status
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ValidationError
from pydantic_core import to_json
from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool

from app.auth.service import TokenInfo
from app.db.engine import Database
from app.deps import Admin, DatabaseDep, Viewer, database_of, settings_of
from app.openapi import BEARER_REQUIRED
from app.runs import flows, listing, service
from app.runs.schemas import BatchOut, RunBatchIn, RunIn, RunOut, RunPage
from app.schemas_common import Timestamp
from app.security.authenticator import token_with_scope
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
    openapi_extra={**json_body(RunIn), **BEARER_REQUIRED},
)
async def post_run(request: Request) -> Response:
    """Record one run. Safe to retry: the same (pipeline, run_id) and body returns 200.

    Parsing, storing and answering happen in one worker-thread hop; the body is
    validated from its bytes and the answer serialised once (see ``post_batch``).
    Storing, then evaluating the pipeline's alert rules, is ``flows.record_run``.
    The token, database and settings are resolved here, not as dependencies: FastAPI's
    solving of them was a sixth of the interpreter's time on this, the busiest route
    (bench/README.md, "Single runs"); ``BEARER_REQUIRED`` documents the token.
    """
    token = await token_with_scope(request, "ingest")
    raw = await request.body()
    return await run_in_threadpool(
        store_run, database_of(request), raw, token, settings_of(request)
    )


def store_run(db: Database, raw: bytes, token: TokenInfo, settings: Settings) -> Response:
    return answer(flows.record_run(db, parse_body(RunIn, raw), token, settings))


def answer(recorded: flows.Answer) -> Response:
    """The flow's answer as JSON; its follow-up (alert evaluation) runs after it is sent."""
    response = Response(recorded.body, status_code=recorded.status, media_type="application/json")
    if recorded.follow_up is not None:
        response.background = BackgroundTask(recorded.follow_up)
    return response


@router.post(
    "/batch",
    response_model=BatchOut,
    status_code=status.HTTP_201_CREATED,
    responses={
        200: {"model": BatchOut, "description": "Every run was already stored: a retry"},
        409: {"description": "A run_id exists with different values"},
    },
    openapi_extra={**json_body(RunBatchIn), **BEARER_REQUIRED},
)
async def post_batch(request: Request) -> Response:
    """Record up to `max_batch_runs` runs, all or nothing. Body: `{"runs": [...]}`.

    The body is validated straight from its bytes by pydantic-core (FastAPI would
    ``json.loads`` it and validate the Python objects: a third of a 1000-run batch's
    time), in the same worker-thread hop that stores it, and the answer is serialised
    once. The counts go to the metrics middleware through the request's state
    (``ingest_counts``), so it need not parse the answer back.
    """
    token = await token_with_scope(request, "ingest")  # as in post_run
    raw = await request.body()
    recorded = await run_in_threadpool(
        store_batch, database_of(request), raw, token, settings_of(request)
    )
    request.state.ingest_counts = (recorded.created, recorded.existing)
    return answer(recorded)


def store_batch(db: Database, raw: bytes, token: TokenInfo, settings: Settings) -> flows.Answer:
    return flows.record_batch(db, parse_body(RunBatchIn, raw), token, settings)


def parse_body(model: type[M], raw: bytes) -> M:
    """Validate a JSON body from its bytes; errors read as FastAPI's own (a 422)."""
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        errors = [{**e, "loc": ("body", *e["loc"])} for e in exc.errors(include_url=False)]
        raise RequestValidationError(errors) from None


@router.get("", response_model=RunPage)
def list_runs(
    db: DatabaseDep,
    viewer: Viewer,
    pipeline: str | None = None,
    variant: str | None = None,
    since: Annotated[Timestamp | None, Query(description="started_at >= since")] = None,
    until: Annotated[Timestamp | None, Query(description="started_at < until")] = None,
    limit: Annotated[int, Query(ge=1, le=listing.MAX_LIST_LIMIT)] = 100,
    cursor: str | None = None,
) -> Response:
    """Runs, newest first. Follow `next_cursor` for the next page."""
    with db.read() as session:
        body = listing.list_page(
            session,
            viewer=viewer,
            pipeline=pipeline,
            variant=variant,
            since=since,
            until=until,
            cursor=cursor,
            limit=limit,
        )
    # Serialised once, here, by pydantic-core: returning a model would make FastAPI dump
    # and re-validate up to 1000 runs (response_model still documents the shape).
    return Response(to_json(body), media_type="application/json")


@router.get("/{pk}", response_model=RunOut)
def get_run(pk: RunPk, db: DatabaseDep, viewer: Viewer) -> RunOut:
    """One stored run by its id, with its interruptions."""
    with db.read() as session:
        return service.get(session, pk, viewer)


@router.delete("/{pk}", status_code=status.HTTP_204_NO_CONTENT)
def delete_run(pk: RunPk, db: DatabaseDep, token: Admin) -> Response:
    """Delete one run and its interruptions (admin)."""
    with db.write() as session:
        service.delete(session, pk, token)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
