"""Serving: uvicorn with TCP_NODELAY on every accepted connection.

With ``--workers N`` (N > 1) uvicorn shares one listening socket between processes,
and accepted connections were left with Nagle's algorithm on: every request after
the first on a kept-alive connection waited ~40 ms for the peer's delayed ACK
(/healthz: 47 ms instead of 1.5 ms, measured here). Setting TCP_NODELAY ourselves
makes every deployment mode answer at once.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any

try:  # httptools is the faster parser; h11 is the pure-Python fallback.
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as _Base
except ImportError:  # pragma: no cover - depends on the installed extras
    from uvicorn.protocols.http.h11_impl import H11Protocol as _Base  # type: ignore[assignment]


def set_nodelay(transport: asyncio.BaseTransport) -> None:
    sock: Any = transport.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class NoDelayProtocol(_Base):
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        set_nodelay(transport)
        super().connection_made(transport)


PROTOCOL = "app.server:NoDelayProtocol"
