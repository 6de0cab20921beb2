"""Operations telemetry: Prometheus metrics at ``/metrics``, JSON logs, request ids.

- ``context``: the request id (``X-Request-ID``) and the contextvar log records read.
- ``logs``: the JSON (or text) formatter and ``configure_logging``.
- ``metrics``: per-app registry, HTTP and ingestion metrics, the pure ASGI middleware.
- ``business``: per-pipeline gauges read from the database at scrape time.
- ``router``: ``GET /metrics`` (optionally behind a bearer token scope).
- ``install``: the registry, the middleware and /metrics added to the application.
"""
