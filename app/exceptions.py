"""The error hierarchy: what went wrong, its HTTP status and a stable code.

Imports nothing from the app, so any layer may raise these without pulling in
FastAPI, templates or schemas. Turning them into responses is
``app.exception_handlers``'s job.
"""

from __future__ import annotations

from typing import Any


class CadenceError(Exception):
    status_code = 400
    code = "bad_request"

    def __init__(
        self,
        message: str,
        *,
        fields: list[dict[str, Any]] | None = None,
        headers: dict[str, str] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.fields = fields or []
        self.headers = headers
        self.extra = extra or {}


class NotFound(CadenceError):
    status_code = 404
    code = "not_found"


class Conflict(CadenceError):
    status_code = 409
    code = "conflict"


class Invalid(CadenceError):
    status_code = 422
    code = "validation_error"


class Unauthorized(CadenceError):
    status_code = 401
    code = "unauthorized"

    def __init__(self, message: str) -> None:
        super().__init__(message, headers={"WWW-Authenticate": "Bearer"})


class Forbidden(CadenceError):
    status_code = 403
    code = "forbidden"


class RateLimited(CadenceError):
    status_code = 429
    code = "rate_limited"

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message, headers={"Retry-After": str(retry_after)})
