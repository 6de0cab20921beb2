"""The errors the client raises. Their names differ from the server's own error classes
(``app.errors``) so that code importing both never confuses them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "AuthError",
    "CadenceAPIError",
    "CadenceClientError",
    "ConflictError",
    "ServiceUnavailable",
    "ValidationFailed",
]


class CadenceClientError(Exception):
    """Base of every error this client raises.

    ``status`` is the HTTP status of the server's answer (``None`` when there was no
    answer), ``code`` the server's error code (e.g. ``validation_error``), ``message``
    its explanation, ``fields`` its list of ``{"field": ..., "reason": ...}``, and
    ``method``/``url`` the request that failed (``str(error)`` names them too, so a
    log line says which server and endpoint refused).
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        code: str = "error",
        fields: Sequence[Mapping[str, Any]] = (),
        method: str | None = None,
        url: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.fields: list[dict[str, Any]] = [dict(f) for f in fields]
        self.method = method
        self.url = url

    def __str__(self) -> str:
        where = f"{self.method} {self.url}: " if self.url else ""
        prefix = f"{self.status} {self.code}: " if self.status is not None else ""
        return where + prefix + self.message


class CadenceAPIError(CadenceClientError):
    """The server refused the request (any error answer without a subclass of its own).

    ``batch_offset`` is set by :meth:`CadenceClient.post_runs`: the position, in the list
    you passed, of the first run of the refused batch (``fields`` then name runs by that
    list's index, e.g. ``runs.503.gpu_utilization``).
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        code: str = "error",
        fields: Sequence[Mapping[str, Any]] = (),
        headers: Mapping[str, str] | None = None,
        method: str | None = None,
        url: str | None = None,
    ) -> None:
        super().__init__(message, status=status, code=code, fields=fields, method=method, url=url)
        self.headers: dict[str, str] = dict(headers or {})
        self.batch_offset: int | None = None


class ValidationFailed(CadenceAPIError):
    """422: the body breaks a rule (``fields`` names each offending field)."""


class ConflictError(CadenceAPIError):
    """409: this ``(pipeline, run_id)`` is stored with different values."""


class AuthError(CadenceAPIError):
    """401 (missing or bad token) or 403 (the token lacks the scope or the pipeline)."""


class ServiceUnavailable(CadenceClientError):
    """Every attempt failed with a retryable error; ``cause`` is the last one.

    ``cause`` is the ``httpx.TransportError`` of a failed connection or timeout, or the
    :class:`CadenceAPIError` built from the last 429/5xx answer (whose ``status``,
    ``code``, ``message`` and ``fields`` this error repeats).
    """

    def __init__(
        self, message: str, *, attempts: int, cause: Exception, method: str, url: str
    ) -> None:
        if isinstance(cause, CadenceClientError):
            super().__init__(
                message,
                status=cause.status,
                code=cause.code,
                fields=cause.fields,
                method=method,
                url=url,
            )
        else:
            super().__init__(message, code="unavailable", method=method, url=url)
        self.attempts = attempts
        self.cause = cause
