"""``GET /metrics``: Prometheus text format, optionally behind a bearer token scope."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Request, Response
from prometheus_client import generate_latest
from starlette.concurrency import run_in_threadpool

from app.security.authenticator import bearer

router = APIRouter(tags=["operations"])
# The classic text format every Prometheus (2.x and 3.x) accepts; generate_latest writes it.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


@router.get("/metrics", include_in_schema=False)
async def metrics(
    request: Request, authorization: Annotated[str | None, Header()] = None
) -> Response:
    """Prometheus metrics. ``CADENCE_METRICS_TOKEN_SCOPE`` set: a bearer token with it."""
    scope = request.app.state.settings.metrics_token_scope
    if scope:
        await bearer(request, authorization, scope)
    # Business gauges read the database: off the event loop.
    body = await run_in_threadpool(generate_latest, request.app.state.telemetry.registry)
    return Response(body, media_type=CONTENT_TYPE)
