"""Operations telemetry: Prometheus metrics at ``/metrics``, JSON logs, request ids.

- ``context``: the request id (``X-Request-ID``) and the contextvar log records read.
- ``logs``: the JSON (or text) formatter and ``configure_logging``.
- ``metrics``: per-app registry, HTTP and ingestion metrics, the pure ASGI middleware.
- ``business``: per-pipeline gauges read from the database at scrape time.
- ``router``: ``GET /metrics`` (optionally behind a bearer token scope).
"""

from __future__ import annotations

from fastapi import FastAPI

from app.observability.logs import configure_logging
from app.observability.metrics import Telemetry, TelemetryMiddleware
from app.observability.router import router
from app.settings import Settings

__all__ = ["configure_logging", "install_observability"]


def install_observability(app: FastAPI, settings: Settings) -> None:
    """Metrics registry, /metrics and the request-id/metrics/access-log middleware.

    Call after every other ``add_middleware`` so that it is the outermost of them and
    sees the 413 of the body limit and the 401 of the read gate.
    """
    app.state.telemetry = Telemetry(app)
    app.add_middleware(TelemetryMiddleware, telemetry=app.state.telemetry)
    app.include_router(router)
