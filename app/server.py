"""Serving: uvicorn with TCP_NODELAY and read deadlines on every accepted connection.

With ``--workers N`` (N > 1) uvicorn shares one listening socket between processes,
and accepted connections were left with Nagle's algorithm on: every request after
the first on a kept-alive connection waited ~40 ms for the peer's delayed ACK
(/healthz: 47 ms instead of 1.5 ms, measured here). Setting TCP_NODELAY ourselves
makes every deployment mode answer at once.

uvicorn has no header or body read timeout: its keep-alive timeout only runs between a
response and the next request's first byte. A connection that sent nothing, or its
headers a byte at a time (slowloris), or a body slower than it declared, stayed open
for ever (1,000 slowloris and 300 slow-body connections were all open after 30 s). So
each connection here gets two deadlines (docs/security.md, "Connections"):

- ``CADENCE_HEADER_TIMEOUT_SECONDS``: from the connection (or the next request's first
  byte) to the end of the request headers; missed, it is answered 408 and closed.
- ``CADENCE_BODY_TIMEOUT_SECONDS``: from the end of the headers to the end of the body,
  however slowly it trickles in; missed, the connection is closed (the app sees a client
  disconnect, logged and counted as 499).
"""

from __future__ import annotations

import asyncio
import logging
import socket
from typing import Any

from app.settings import get_settings

try:  # httptools is the faster parser; h11 is the pure-Python fallback.
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as _Base
except ImportError:  # pragma: no cover - depends on the installed extras
    from uvicorn.protocols.http.h11_impl import H11Protocol as _Base  # type: ignore[assignment]

# The deadlines hook httptools' parser callbacks; under the h11 fallback (no httptools
# installed) only TCP_NODELAY applies, and a proxy must bound slow clients.
DEADLINES = hasattr(_Base, "on_headers_complete")
MAX_HEADER_BYTES = 64 * 1024  # request line and headers; real ones are under 8 KB
log = logging.getLogger("cadence.server")


def plain_answer(status: bytes, text: bytes) -> bytes:
    """A complete HTTP/1.1 answer that closes the connection (sent outside the app)."""
    return (
        b"HTTP/1.1 " + status + b"\r\ncontent-type: text/plain; charset=utf-8\r\n"
        b"connection: close\r\ncontent-length: " + str(len(text)).encode() + b"\r\n\r\n" + text
    )


REQUEST_TIMEOUT = plain_answer(b"408 Request Timeout", b"request headers not received in time\n")
HEADERS_TOO_LARGE = plain_answer(
    b"431 Request Header Fields Too Large", b"request line and headers over 64 KiB\n"
)


def set_nodelay(transport: asyncio.BaseTransport) -> None:
    sock: Any = transport.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class NoDelayProtocol(_Base):
    """uvicorn's HTTP protocol with TCP_NODELAY and the header and body deadlines."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        settings = get_settings()  # each worker process reads the environment once
        self.header_timeout = settings.header_timeout_seconds
        self.body_timeout = settings.body_timeout_seconds
        self.read_deadline: asyncio.TimerHandle | None = None
        self.header_bytes = 0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        set_nodelay(transport)
        super().connection_made(transport)
        if DEADLINES:
            self._arm(self.header_timeout, self._headers_late)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def on_message_begin(self) -> None:  # a request's first byte: its headers' clock
        super().on_message_begin()
        self.header_bytes = 0
        if self.read_deadline is None:
            self._arm(self.header_timeout, self._headers_late)

    def on_url(self, url: bytes) -> None:
        self._count(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count(len(name) + len(value))
        super().on_header(name, value)

    def _count(self, size: int) -> None:
        """Headers sent fast but without end would grow in memory until the deadline."""
        self.header_bytes += size
        if self.header_bytes > MAX_HEADER_BYTES and not self.transport.is_closing():
            self.transport.write(HEADERS_TOO_LARGE)
            self.transport.close()

    def on_headers_complete(self) -> None:
        self._disarm()
        super().on_headers_complete()
        self._arm(self.body_timeout, self._body_late)

    def on_message_complete(self) -> None:
        self._disarm()
        super().on_message_complete()

    def _arm(self, seconds: float, handler: Any) -> None:
        self._disarm()
        self.read_deadline = self.loop.call_later(seconds, handler)

    def _disarm(self) -> None:
        if self.read_deadline is not None:
            self.read_deadline.cancel()
            self.read_deadline = None

    def _headers_late(self) -> None:
        self.read_deadline = None
        if self.transport.is_closing():
            return
        log.info("closed a connection: no complete request headers in %gs", self.header_timeout)
        if self.cycle is None or self.cycle.response_complete:  # no answer under way
            self.transport.write(REQUEST_TIMEOUT)
        self.transport.close()

    def _body_late(self) -> None:
        self.read_deadline = None
        if not self.transport.is_closing():
            log.info("closed a connection: request body not received in %gs", self.body_timeout)
            self.transport.close()


PROTOCOL = "app.server:NoDelayProtocol"
