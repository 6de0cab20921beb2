"""The OpenAPI document as clients need it: the bearer scheme (Swagger UI's Authorize
button), the real error body on every 4xx and 5xx answer, and examples.

FastAPI documents a ``{"detail": [...]}`` 422 that this API never sends (app/errors.py
answers every error with ``{"error": {"code", "message", "fields"}}``), and shows the
``Authorization`` header as a plain parameter. ``install_openapi`` rewrites both once,
when the document is first built.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

SCHEME = "bearerAuth"
# ``openapi_extra`` of a route that checks its token itself (no ``Ingestor``/``Admin``
# parameter for FastAPI to see): documented as needing the bearer scheme.
BEARER_REQUIRED: dict[str, Any] = {"security": [{SCHEME: []}]}
ERROR_REF = {"$ref": "#/components/schemas/ErrorResponse"}
ERROR_SCHEMAS: dict[str, Any] = {
    "FieldError": {
        "type": "object",
        "required": ["field", "reason"],
        "properties": {
            "field": {"type": "string", "description": "Dotted path, e.g. runs.3.workers"},
            "reason": {"type": "string"},
        },
    },
    "ErrorDetail": {
        "type": "object",
        "required": ["code", "message"],
        "properties": {
            "code": {"type": "string", "description": "Stable, e.g. validation_error"},
            "message": {"type": "string", "description": "For people; may change."},
            "fields": {"type": "array", "items": {"$ref": "#/components/schemas/FieldError"}},
        },
    },
    "ErrorResponse": {
        "type": "object",
        "required": ["error"],
        "properties": {"error": {"$ref": "#/components/schemas/ErrorDetail"}},
    },
}
# (status, description, example error) documented where they can happen.
ERRORS: dict[str, tuple[str, dict[str, Any]]] = {
    "401": (
        "No token, or an unknown or revoked one",
        {"code": "unauthorized", "message": "missing bearer token"},
    ),
    "403": (
        "The token lacks the scope or the pipeline",
        {"code": "forbidden", "message": "this token lacks the 'ingest' scope"},
    ),
    "404": ("Not found", {"code": "not_found", "message": "no pipeline named 'ranker'"}),
    "409": (
        "The run_id is stored with different values",
        {
            "code": "conflict",
            "message": "run 'r1' of pipeline 'ranker' already exists with different workers",
            "fields": [{"field": "workers", "reason": "differs from the stored run"}],
        },
    ),
    "413": ("The body is too large", {"code": "payload_too_large", "message": "body over 1 MiB"}),
    "415": (
        "The body's Content-Type is not JSON (send application/json, or no Content-Type)",
        {
            "code": "unsupported_media_type",
            "message": "Content-Type must be application/json, not 'text/plain'",
            "fields": [{"field": "Content-Type", "reason": "must be application/json"}],
        },
    ),
    "422": (
        "Invalid input: each bad field with the reason",
        {
            "code": "validation_error",
            "message": "invalid request: gpu_utilization: must be a fraction between 0 and 1",
            "fields": [
                {
                    "field": "gpu_utilization",
                    "reason": "must be a fraction between 0 and 1; 38 looks like a "
                    "percentage: did you mean 0.38?",
                }
            ],
        },
    ),
    "503": (
        "The database is unavailable; retry after Retry-After seconds",
        {"code": "database_unavailable", "message": "the database is unavailable; retry shortly"},
    ),
}
RUN_EXAMPLE = {
    "pipeline": "recsys-ranker",
    "run_id": "2026-11-30-weekly",
    "started_at": "2026-11-30T08:00:00+00:00",
    "finished_at": "2026-11-30T22:00:00+00:00",
    "workers": 8,
    "gpu_type": "A100-80GB",
    "gpu_utilization": 0.38,
    "utilization_source": "dcgm_sm_active",
    "quality_metric": "ndcg@10",
    "quality_value": 0.412,
    "data_stall_hours": 5.0,
    "checkpoint_hours": 1.0,
    "tags": {"commit": "abc123"},
}


TOKEN_MODE_403 = (
    "Token mode only (CADENCE_READ_ACCESS=token): the token lacks the read scope, or is "
    "limited to other pipelines"
)


def error_response(status: str) -> dict[str, Any]:
    description, example = ERRORS[status]
    return {
        "description": description,
        "content": {"application/json": {"schema": ERROR_REF, "example": {"error": example}}},
    }


def _document(operation: dict[str, Any], path: str, method: str) -> None:
    params = operation.get("parameters", [])
    secured = operation.get("security") == BEARER_REQUIRED["security"] or any(
        p.get("in") == "header" and p.get("name", "").lower() == "authorization" for p in params
    )
    # Swagger UI ignores an Authorization parameter; the security scheme replaces it.
    params = [p for p in params if p.get("name", "").lower() != "authorization"]
    if params:
        operation["parameters"] = params
    else:
        operation.pop("parameters", None)
    # Reads need a token only in CADENCE_READ_ACCESS=token mode: the scheme is optional.
    operation["security"] = [{SCHEME: []}] if secured else [{SCHEME: []}, {}]
    # 403 on reads too: in token mode a token without the read scope, or limited to
    # other pipelines, is refused (app/security/gate.py, app/deps.py).
    statuses = ["401", "403", "422", "503"]
    # A pipeline named in the path, or in the query (GET /api/v1/runs?pipeline=), may not exist.
    named = any(p.get("in") == "query" and p.get("name") == "pipeline" for p in params)
    if "{" in path or path.startswith("/api/v1/pipelines") or named:
        statuses.append("404")
    if method in ("post", "put", "patch"):
        statuses += ["413", "415"]
    if path.startswith("/api/v1/runs") and method == "post":
        statuses.append("409")
    responses = operation.setdefault("responses", {})
    for status in sorted(statuses):
        description = responses.get(status, {}).get("description")
        responses[status] = error_response(status)
        if description and status != "422":  # keep an endpoint's own explanation
            responses[status]["description"] = description
    if not secured:
        responses["403"]["description"] = TOKEN_MODE_403
    body = operation.get("requestBody", {}).get("content", {}).get("application/json")
    if body is not None and path == "/api/v1/runs" and method == "post":
        body["example"] = RUN_EXAMPLE
    elif body is not None and path == "/api/v1/runs/batch":
        body["example"] = {"runs": [RUN_EXAMPLE]}


def build_openapi(app: FastAPI) -> dict[str, Any]:
    spec = get_openapi(
        title=app.title,
        version=app.version,
        summary=app.summary,
        description=app.description,
        routes=app.routes,
    )
    components = spec.setdefault("components", {})
    components.setdefault("securitySchemes", {})[SCHEME] = {
        "type": "http",
        "scheme": "bearer",
        "description": "A Cadence token (`cadence token create`): ingest, read or admin scope.",
    }
    schemas = components.setdefault("schemas", {})
    schemas.update(ERROR_SCHEMAS)
    for path, item in spec.get("paths", {}).items():
        if not path.startswith("/api/"):
            continue
        for method, operation in item.items():
            if isinstance(operation, dict) and "responses" in operation:
                _document(operation, path, method)
    # FastAPI's own validation body is never sent; drop it once nothing refers to it.
    text = repr(spec["paths"])
    for name in ("HTTPValidationError", "ValidationError"):
        if f"#/components/schemas/{name}'" not in text:
            schemas.pop(name, None)
    return spec


def install_openapi(app: FastAPI) -> None:
    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = build_openapi(app)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
