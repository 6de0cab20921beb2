"""The one handler for every error: a stable JSON body for clients, a page for browsers.

The classes live in ``app.exceptions`` (which imports nothing from the app); this module
turns them, and framework and database errors, into responses. ``error_body`` is the
only place an error body is built.

Error body::

    {"error": {"code": "validation_error", "message": "...",
               "fields": [{"field": "runs.3.gpu_utilization", "reason": "..."}]}}
"""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from sqlalchemy.exc import DBAPIError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from app.exceptions import CadenceError
from app.planning.model import PlanningError
from app.schemas_common import PATTERN_REASONS
from app.templating import render_error_page

log = logging.getLogger("cadence.errors")
CLIENT_CLOSED_REQUEST = 499
CLIENT_DISCONNECTED = "client_disconnected"


def error_body(
    code: str, message: str, fields: list[dict[str, Any]] | None = None, **extra: Any
) -> dict[str, Any]:
    body: dict[str, Any] = {"code": code, "message": message}
    if fields:
        body["fields"] = fields
    body.update(extra)
    return {"error": body}


def cadence_error_body(exc: CadenceError) -> dict[str, Any]:
    return error_body(exc.code, exc.message, exc.fields, **exc.extra)


def field_name(loc: tuple[Any, ...] | list[Any]) -> str:
    """``("body", "runs", 3, "gpu_utilization")`` -> ``"runs.3.gpu_utilization"``."""
    parts = [str(p) for p in loc if p not in ("body", "query", "path", "header")]
    return ".".join(parts) or "body"


def _n(value: Any) -> str:
    """A bound as people write it: 1000000000000, 0.001, 1e-09."""
    if isinstance(value, int | float):
        return str(int(value)) if float(value).is_integer() and abs(value) < 1e16 else f"{value:g}"
    return str(value)


# pydantic's wording ("Input should be greater than or equal to 1e-09") in a person's:
# the rule and what to send. By error type; ``{x}`` are the error's context values.
PLAIN: dict[str, Any] = {
    "missing": lambda c: "required: add this field",
    # A bound of 1e-9 is "more than 0" at the stored resolution (methodology.md §2).
    "greater_than_equal": lambda c: (
        "must be greater than 0" if 0 < c["ge"] <= 1e-9 else f"must be at least {_n(c['ge'])}"
    ),
    "greater_than": lambda c: f"must be more than {_n(c['gt'])}",
    "less_than_equal": lambda c: f"must be at most {_n(c['le'])}",
    "less_than": lambda c: f"must be less than {_n(c['lt'])}",
    "float_parsing": lambda c: "must be a number, e.g. 0.38 or 14",
    "float_type": lambda c: "must be a number, e.g. 0.38 or 14 (not text or true/false)",
    "int_parsing": lambda c: "must be a whole number, e.g. 8",
    "int_type": lambda c: "must be a whole number, e.g. 8 (not text or true/false)",
    "int_from_float": lambda c: "must be a whole number, e.g. 8",
    "string_type": lambda c: "must be text in quotes",
    "string_too_short": lambda c: (
        "must not be empty"
        if c.get("min_length") == 1
        else f"must be at least {c.get('min_length')} characters"
    ),
    "string_too_long": lambda c: f"must be at most {c.get('max_length')} characters",
    "too_long": lambda c: f"at most {c.get('max_length')} items",
    "too_short": lambda c: f"at least {c.get('min_length')} item(s)",
    "literal_error": lambda c: f"must be one of {c.get('expected')}",
    "enum": lambda c: f"must be one of {c.get('expected')}",
    "bool_type": lambda c: "must be true or false",
    "dict_type": lambda c: 'must be an object, e.g. {"key": "value"}',
    "list_type": lambda c: "must be a list, e.g. [...]",
    "json_invalid": lambda c: "the body is not valid JSON: check quotes and commas",
}


def plain_reason(err: Any) -> str:
    """The reason for one validation error in plain words (see :data:`PLAIN`)."""
    reason = str(err.get("msg", "invalid")).removeprefix("Value error, ")
    words = PLAIN.get(str(err.get("type")))
    if words is None:
        return reason
    try:
        return str(words(err.get("ctx") or {}))
    except KeyError:
        return reason


# Path parameters by what the URL holds (the docs' words): a person never sent "pk".
PATH_WORDS = {"pk": ("id", "the run id"), "name": ("name", "the pipeline name")}


def validation_fields(errors: Any) -> list[dict[str, Any]]:
    fields = []
    for err in errors:
        reason = plain_reason(err)
        loc = tuple(err.get("loc", ()))
        if len(loc) == 2 and loc[0] == "path":
            name, words = PATH_WORDS.get(str(loc[1]), (str(loc[1]), f"the {loc[1]}"))
            fields.append({"field": name, "reason": f"{reason} ({words} in the URL path)"})
            continue
        if err.get("type") == "extra_forbidden":
            reason = "unknown field (check the spelling; see /docs for the accepted fields)"
        elif err.get("type") == "string_pattern_mismatch":
            reason = PATTERN_REASONS.get(str(err.get("ctx", {}).get("pattern")), reason)
        elif err.get("type") == "timezone_aware":
            reason = "timestamp needs a UTC offset, e.g. 2026-11-02T08:00:00+00:00"
        # An unparsable body's loc is ("body", offset): the field is the body.
        json_invalid = err.get("type") == "json_invalid"
        fields.append(
            {"field": "body" if json_invalid else field_name(err.get("loc", ())), "reason": reason}
        )
    return fields


def _path_methods(app: Any) -> list[tuple[re.Pattern[str], int, str]]:
    """(path regex, path parameters, "GET, POST") of every documented path, built once."""
    table = getattr(app.state, "path_methods", None)
    if table is None:
        table = []
        for template, operations in app.openapi().get("paths", {}).items():
            regex = re.sub(r"\\{\w+\\}", "[^/]+", re.escape(template))
            methods = ", ".join(sorted(m.upper() for m in operations if m != "parameters"))
            table.append((re.compile(f"^{regex}$"), template.count("{"), methods))
        app.state.path_methods = table
    return table


def allowed_methods(request: Request) -> str | None:
    """The methods the API documents for this path, or None for an undocumented one.
    Starlette's 405 names only the first route whose path matched: OPTIONS
    /alerts/deliveries answered "Allow: DELETE", from /alerts/{rule_id}. Where several
    templates match, the most specific (fewest parameters) is the path's own."""
    path = request.scope.get("path", "")
    matches = [(n, m) for regex, n, m in _path_methods(request.app) if regex.match(path)]
    return min(matches)[1] if matches else None


def wants_html(request: Request) -> bool:
    if request.url.path.startswith("/api/"):
        return False
    return "text/html" in request.headers.get("accept", "")


def _respond(
    request: Request, status: int, body: dict[str, Any], headers: dict[str, str] | None = None
) -> Response:
    if wants_html(request):
        return render_error_page(request, status, body["error"]["message"], headers)
    return JSONResponse(body, status_code=status, headers=headers)


async def _cadence(request: Request, exc: CadenceError) -> Response:
    body = cadence_error_body(exc)
    return _respond(request, exc.status_code, body, exc.headers)


async def _validation(request: Request, exc: RequestValidationError) -> Response:
    allow = allowed_methods(request)
    method = "GET" if request.method == "HEAD" else request.method  # HEAD rides on GET
    if allow is not None and method not in allow.split(", "):
        # A route clash: GET /api/v1/runs/batch matched /runs/{pk} and failed its
        # validation ("pk: must be a whole number"), but the path's own route has no GET.
        message = f"{request.method} is not allowed on this path (allowed: {allow})"
        body = error_body("method_not_allowed", message)
        return _respond(request, 405, body, {"Allow": allow})
    fields = validation_fields(exc.errors())
    summary = "; ".join(f"{f['field']}: {f['reason']}" for f in fields[:5])
    body = error_body("validation_error", f"invalid request: {summary}", fields)
    return _respond(request, 422, body)


async def _http(request: Request, exc: StarletteHTTPException) -> Response:
    code = {404: "not_found", 405: "method_not_allowed", 413: "payload_too_large"}.get(
        exc.status_code, "http_error"
    )
    headers = getattr(exc, "headers", None)
    allow = allowed_methods(request) if exc.status_code == 405 else None
    if allow:
        headers = {**(headers or {}), "Allow": allow}
    return _respond(request, exc.status_code, error_body(code, str(exc.detail)), headers)


async def _client_gone(request: Request, exc: ClientDisconnect) -> Response:
    # The client hung up before its body was read (a cancelled upload, a killed
    # process): nothing went wrong here, and nobody reads the answer. Logged at INFO
    # and counted under 499 (nginx's "client closed request"), not as a 500 at ERROR.
    log.info("client disconnected before its body was read: %s", request.url.path)
    body = error_body(CLIENT_DISCONNECTED, "the client closed the connection mid-request")
    return JSONResponse(body, status_code=CLIENT_CLOSED_REQUEST)


async def _planning(request: Request, exc: PlanningError) -> Response:
    return _respond(request, 422, error_body("invalid_plan", str(exc)))


async def _unexpected(request: Request, exc: Exception) -> Response:
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    body = error_body("internal_error", "something went wrong on our side; it has been logged")
    return _respond(request, 500, body)


# Database errors that mean "retry later" answer 503 with Retry-After, never 500:
# OperationalError (connection refused or lost, server shutting down or starting up,
# a query cancelled by statement_timeout), InterfaceError (a closed connection),
# any DBAPIError SQLAlchemy classified as a disconnect, and an exhausted pool.
RETRY_LATER = {"Retry-After": "5"}


def database_down_body(request: Request, exc: Exception) -> dict[str, Any]:
    """The 503's body, logged once: the one place it is built (the handler below and
    the read gate, which answers before the routes, both use it)."""
    first_line = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
    if query_cancelled(exc):
        log.warning("query cancelled on %s %s: %s", request.method, request.url.path, first_line)
        return error_body("statement_timeout", STATEMENT_TIMEOUT_MESSAGE)
    log.warning("database unavailable: %s", first_line)
    return error_body("database_unavailable", "the database is unavailable; retry shortly")


async def _database_down(request: Request, exc: Exception) -> Response:
    return _respond(request, 503, database_down_body(request, exc), RETRY_LATER)


async def _database_error(request: Request, exc: DBAPIError) -> Response:
    if exc.connection_invalidated:
        return await _database_down(request, exc)
    raise exc  # anything else is a bug: _unexpected (the 500 handler) logs it


# Each error kind and its handler. Starlette picks the handler of the nearest class in
# an exception's MRO, so OperationalError finds _database_down before DBAPIError's.
HANDLERS: tuple[tuple[type[Exception], Callable[[Request, Any], Awaitable[Response]]], ...] = (
    (CadenceError, _cadence),
    (RequestValidationError, _validation),
    (StarletteHTTPException, _http),
    (ClientDisconnect, _client_gone),
    (PlanningError, _planning),
    (Exception, _unexpected),
    (OperationalError, _database_down),
    (InterfaceError, _database_down),
    (PoolTimeout, _database_down),
    (DBAPIError, _database_error),
)


def install_error_handlers(app: FastAPI) -> None:
    for kind, handler in HANDLERS:
        app.add_exception_handler(kind, handler)


STATEMENT_TIMEOUT_MESSAGE = (
    "the query took longer than the database's statement timeout; narrow the request"
)


def query_cancelled(exc: Exception) -> bool:
    """PostgreSQL cancelled the statement (``statement_timeout``; SQLSTATE 57014)."""
    try:
        from psycopg.errors import QueryCanceled
    except ImportError:  # pragma: no cover - psycopg is a dependency
        return False
    return isinstance(getattr(exc, "orig", None), QueryCanceled)
