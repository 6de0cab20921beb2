"""ASGI middleware: the request body size limit (413), JSON bodies only for the API (415),
response compression."""

from __future__ import annotations

import json
from typing import Any

from starlette.exceptions import HTTPException
from starlette.middleware.gzip import GZipMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.exception_handlers import error_body


class BodyTooLarge(HTTPException):
    """Raised from ``receive``; FastAPI re-raises HTTPExceptions from body reading as-is."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__(413, too_large_message(max_bytes))


def too_large_message(max_bytes: int) -> str:
    return f"request body is larger than {max_bytes} bytes; send fewer runs per batch"


class BodySizeLimit:
    """Refuse bodies over ``max_bytes`` with 413, by Content-Length or while streaming."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = None
        chunked = False
        for name, value in scope.get("headers", []):
            if name == b"content-length" and value.isdigit():
                declared = int(value)
            elif name == b"transfer-encoding":
                chunked = True
        if declared is not None and declared > self.max_bytes:
            await self._reject(send)
            return
        if not chunked:
            # HTTP/1.1: the body is exactly Content-Length bytes (none without one), and
            # the server delivers no more: nothing to count, and two wrappers fewer on
            # every request (ingestion's above all). Only a chunked body is counted.
            await self.app(scope, receive, send)
            return
        seen = 0
        started = False

        async def limited_receive() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise BodyTooLarge(self.max_bytes)
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except BodyTooLarge:
            if not started:
                await self._reject(send)

    async def _reject(self, send: Send) -> None:
        body = json.dumps(
            error_body("payload_too_large", too_large_message(self.max_bytes))
        ).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


# Answers smaller than this go as they are: gzip's 20-byte frame and the CPU are not
# worth it (a single run's answer is ~900 bytes). Level 4, not Starlette's 9 or zlib's
# 6: measured on a 1,000-run page (730 KB of JSON) and a pipeline page (121 KB), level 4
# took a half of level 6's time (and an eighth of 9's) for a result 5-20% larger
# (bench/README.md, "Page weight").
GZIP_MINIMUM_BYTES = 1024
GZIP_LEVEL = 4


class Compression:
    """gzip for HTML, JSON and CSV answers of 1 KiB and more, to clients that accept it.

    A client that does not send ``Accept-Encoding: gzip`` (pipelines posting runs with
    most HTTP libraries, wrk in the benchmark) skips the wrapper altogether, so ingestion
    pays nothing for it. Starlette's responder leaves an answer alone that already has a
    Content-Encoding (the pre-compressed static files, ``app.assets``) and images, and
    compresses a streamed answer chunk by chunk.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.gzip = GZipMiddleware(app, minimum_size=GZIP_MINIMUM_BYTES, compresslevel=GZIP_LEVEL)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and accepts_gzip(scope):
            await self.gzip(scope, receive, send)
        else:
            await self.app(scope, receive, send)


def accepts_gzip(scope: Scope) -> bool:
    for name, value in scope.get("headers", []):
        if name == b"accept-encoding":
            return b"gzip" in value.lower()
    return False


JSON_METHODS = frozenset({"POST", "PUT", "PATCH"})


def is_json(content_type: bytes) -> bool:
    """``application/json`` or ``application/<anything>+json``, parameters allowed."""
    kind = content_type.split(b";", 1)[0].strip().lower()
    return kind == b"application/json" or (
        kind.startswith(b"application/") and kind.endswith(b"+json")
    )


def unsupported_message(content_type: bytes) -> str:
    sent = content_type.decode("latin-1")[:100]
    return f"Content-Type must be application/json, not {sent!r}"


class JsonBodiesOnly:
    """A body sent to the API (``/api/...``) with a Content-Type that is not JSON is a 415.

    It used to be parsed as JSON whatever it said it was: a form post (curl's ``-d``
    without a header) or ``text/csv`` was read as if it were JSON. A body *without* a
    Content-Type is still read as JSON (what clients that send raw bytes do; the
    cadence-client always sends ``application/json``). Requests without a body pass.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        checked = (
            scope["type"] == "http"
            and scope["method"] in JSON_METHODS
            and scope["path"].startswith("/api/")
        )
        content_type = _refused_content_type(scope["headers"]) if checked else None
        if content_type is not None:
            await _send_error(send, 415, unsupported_message(content_type))
            return
        await self.app(scope, receive, send)


def _refused_content_type(headers: Any) -> bytes | None:
    """The request's Content-Type when it carries a body that is declared not JSON."""
    content_type = b""
    has_body = False
    for name, value in headers:
        if name == b"content-type":
            content_type = value
        elif name == b"content-length":
            has_body = has_body or value.strip() not in (b"", b"0")
        elif name == b"transfer-encoding":
            has_body = True
    if not has_body or not content_type.strip() or is_json(content_type):
        return None
    return content_type


async def _send_error(send: Send, status: int, message: str) -> None:
    field = {"field": "Content-Type", "reason": "must be application/json"}
    body = json.dumps(error_body("unsupported_media_type", message, [field])).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
