"""ASGI middleware: request body size limit, response compression."""

from __future__ import annotations

import json

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
