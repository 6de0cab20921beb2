"""``GET /metrics``: Prometheus text format, optionally behind a bearer token scope."""

from __future__ import annotations

import re
from collections.abc import Collection
from typing import Annotated

from fastapi import APIRouter, Header, Request, Response
from prometheus_client import generate_latest
from starlette.concurrency import run_in_threadpool

from app.security.authenticator import bearer

router = APIRouter(tags=["operations"])
# The classic text format every Prometheus (2.x and 3.x) accepts; generate_latest writes it.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
PIPELINE_LABEL = re.compile(rb'[{,]pipeline="((?:[^"\\]|\\.)*)"')


def only_pipelines(exposition: bytes, allowed: Collection[str]) -> bytes:
    """The exposition without samples of pipelines outside a token's limit.

    Comment lines (HELP, TYPE) and samples without a ``pipeline`` label are kept.
    """
    names = {name.encode() for name in allowed}
    kept = []
    for line in exposition.splitlines(keepends=True):
        match = None if line.startswith(b"#") else PIPELINE_LABEL.search(line)
        if match is None or match.group(1) in names:
            kept.append(line)
    return b"".join(kept)


@router.get("/metrics", include_in_schema=False)
async def metrics(
    request: Request, authorization: Annotated[str | None, Header()] = None
) -> Response:
    """Prometheus metrics. ``CADENCE_METRICS_TOKEN_SCOPE`` set: a bearer token with it,
    whose pipeline limit (if any) filters the per-pipeline gauges. In token mode
    (``CADENCE_READ_ACCESS=token``) a ``read`` token at least, unless
    ``CADENCE_METRICS_PUBLIC=true`` (the gauges name every pipeline and its cost)."""
    settings = request.app.state.settings
    closed = settings.read_access == "token" and not settings.metrics_public
    scope = settings.metrics_token_scope or ("read" if closed else "")
    limit = None
    if scope:
        limit = (await bearer(request, authorization, scope)).pipelines
    # Business gauges read the database: off the event loop.
    body = await run_in_threadpool(generate_latest, request.app.state.telemetry.registry)
    if limit is not None:  # a token limited to pipelines sees only theirs
        body = only_pipelines(body, limit)
    return Response(body, media_type=CONTENT_TYPE)
