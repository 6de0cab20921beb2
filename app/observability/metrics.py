"""HTTP and ingestion metrics, and the one pure ASGI middleware that records them.

Each app has its own ``CollectorRegistry`` (tests build many apps in one process). With
``PROMETHEUS_MULTIPROC_DIR`` set, prometheus_client's multiprocess mode is used instead:
counters and histograms go to files in that directory and ``/metrics`` in any worker
aggregates every worker's; otherwise each process exports only its own.
"""

from __future__ import annotations

import json
import logging
import os
import time
from typing import Any

from fastapi import FastAPI
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.multiprocess import MultiProcessCollector
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.observability.business import BusinessCollector
from app.observability.context import REQUEST_ID_HEADER, choose_request_id, request_id_var
from app.observability.kept import KeptCollector

access_log = logging.getLogger("cadence.access")

METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
SINGLE_INGEST = "/api/v1/runs"
BATCH_INGEST = "/api/v1/runs/batch"
INGEST_PATHS = frozenset({SINGLE_INGEST, BATCH_INGEST})
REJECTION_REASONS = frozenset(
    {
        "validation_error",
        "conflict",
        "unauthorized",
        "forbidden",
        "payload_too_large",
        "bad_request",
        "not_found",
        "method_not_allowed",
        "database_unavailable",
        "statement_timeout",
        "internal_error",
        "rate_limited",
        "client_disconnected",
        "unsupported_media_type",
    }
)
QUIET_PATHS = frozenset({"/metrics", "/healthz", "/readyz"})  # access lines at DEBUG
MAX_BUFFERED_BODY = 4 * 1024 * 1024


def multiprocess_dir() -> str | None:
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or None


class Telemetry:
    """The app's metrics. ``registry`` is what ``/metrics`` exposes."""

    def __init__(self, app: FastAPI) -> None:
        self.multiprocess = multiprocess_dir() is not None
        self.registry = CollectorRegistry()
        # In multiprocess mode the values live in files; the exposition registry reads
        # them through MultiProcessCollector, so the metrics themselves are unregistered.
        own = None if self.multiprocess else self.registry
        if self.multiprocess:
            MultiProcessCollector(self.registry)  # type: ignore[no-untyped-call]
        self.requests = Counter(
            "cadence_http_requests_total",
            "HTTP requests by method, matched route template and status code.",
            ("method", "route", "status"),
            registry=own,
        )
        self.duration = Histogram(
            "cadence_http_request_duration_seconds",
            "Time to the end of the response, by method and matched route template.",
            ("method", "route"),
            buckets=BUCKETS,
            registry=own,
        )
        self.runs_ingested = Counter(
            "cadence_runs_ingested_total",
            "Runs accepted by POST /api/v1/runs and /api/v1/runs/batch: created or an "
            "identical retry (existing).",
            ("outcome",),
            registry=own,
        )
        self.ingest_rejections = Counter(
            "cadence_ingest_rejections_total",
            "Ingestion requests answered with an error, by the error body's code.",
            ("reason",),
            registry=own,
        )
        for outcome in ("created", "existing"):
            self.runs_ingested.labels(outcome)
        self.registry.register(BusinessCollector(app))
        self.registry.register(KeptCollector(app))
        # The labelled series of each (method, route, status): prometheus_client's
        # ``labels()`` validates and locks on every call. Bounded: route templates.
        self._series: dict[tuple[str, str, int], tuple[Any, Any]] = {}

    def request_done(self, method: str, route: str, status: int, seconds: float) -> None:
        series = self._series.get((method, route, status))
        if series is None:
            series = (
                self.requests.labels(method, route, str(status)),
                self.duration.labels(method, route),
            )
            self._series[(method, route, status)] = series
        series[0].inc()
        series[1].observe(seconds)

    def record_ingest(self, created: int, existing: int) -> None:
        if created:
            self.runs_ingested.labels("created").inc(created)
        if existing:
            self.runs_ingested.labels("existing").inc(existing)


def route_template(scope: Scope) -> str:
    """The matched route's path template (``/api/v1/runs/{pk}``); ``other`` if none."""
    route = scope.get("route")
    path = getattr(route, "path", None)
    if isinstance(path, str) and path:
        return path
    return "other"


class TelemetryMiddleware:
    """Request id, HTTP metrics, ingestion counters and the access log line.

    Pure ASGI: a clock read, a header appended and a few counter increments per request.
    Only an ingestion POST's error answer is buffered (to read its ``code``); the batch
    route leaves its ``created``/``existing`` in the request's state (parsing a 1,000-run
    answer back cost ~1 ms a batch).
    """

    def __init__(self, app: ASGIApp, telemetry: Telemetry) -> None:
        self.app = app
        self.telemetry = telemetry

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        incoming = None
        for name, value in scope.get("headers", ()):
            if name == REQUEST_ID_HEADER:
                incoming = value
                break
        request_id = choose_request_id(incoming)
        token = request_id_var.set(request_id)
        ingest = scope["method"] == "POST" and scope["path"] in INGEST_PATHS
        if ingest:
            # The batch route leaves its counts in the request's state (``ingest_counts``):
            # made here, so that a copy of the scope further in still shares it.
            scope.setdefault("state", {})
        status = 500
        body = bytearray()

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                headers = [
                    (k, v) for k, v in message.get("headers", ()) if k.lower() != REQUEST_ID_HEADER
                ]
                headers.append((REQUEST_ID_HEADER, request_id.encode("ascii")))
                message = {**message, "headers": headers}
            elif (
                ingest
                and status >= 400
                and message["type"] == "http.response.body"
                and len(body) < MAX_BUFFERED_BODY
            ):
                body.extend(message.get("body", b""))
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        except BaseException:
            status = 500  # ServerErrorMiddleware (outside us) answers it
            self._record(scope, status, start, body, ingest)
            raise  # the request id stays set so the 500's error log line carries it
        self._record(scope, status, start, body, ingest)
        request_id_var.reset(token)

    def _record(
        self, scope: Scope, status: int, start: float, body: bytearray, ingest: bool
    ) -> None:
        elapsed = time.perf_counter() - start
        method = scope["method"] if scope["method"] in METHODS else "other"
        route = route_template(scope)
        t = self.telemetry
        t.request_done(method, route, status, elapsed)
        if ingest:
            self._record_ingest(scope, status, bytes(body))
        level = logging.DEBUG if scope["path"] in QUIET_PATHS else logging.INFO
        if access_log.isEnabledFor(level):
            access_log.log(
                level,
                "%s %s %d",
                scope["method"],
                scope["path"],
                status,
                extra={
                    "method": scope["method"],
                    "route": route,
                    "path": scope["path"],
                    "status": status,
                    "duration_ms": round(elapsed * 1000, 3),
                },
            )

    def _record_ingest(self, scope: Scope, status: int, body: bytes) -> None:
        """Count stored runs (created, existing) or a rejection's reason; only an error's
        answer is buffered and parsed."""
        t = self.telemetry
        if status < 400:
            if scope["path"] == SINGLE_INGEST:
                t.record_ingest(1 if status == 201 else 0, 1 if status == 200 else 0)
                return
            counts = scope["state"].get("ingest_counts")
            if counts is not None:
                t.record_ingest(*counts)
            return
        error = _json(body).get("error")
        code = error.get("code") if isinstance(error, dict) else None
        reason = code if code in REJECTION_REASONS else "other"
        t.ingest_rejections.labels(reason).inc()


def _json(body: bytes) -> dict[str, Any]:
    try:
        value = json.loads(body)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
