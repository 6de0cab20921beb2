"""The telemetry layer added to the application by ``create_app``."""

from __future__ import annotations

from fastapi import FastAPI

from app.observability.metrics import Telemetry, TelemetryMiddleware
from app.observability.router import router


def install_observability(app: FastAPI) -> None:
    """Metrics registry, /metrics and the request-id/metrics/access-log middleware.

    Call after every other ``add_middleware`` so that it is the outermost of them and
    sees the 413 of the body limit and the 401 of the read gate.
    """
    app.state.telemetry = Telemetry(app)
    app.add_middleware(TelemetryMiddleware, telemetry=app.state.telemetry)
    app.include_router(router)
