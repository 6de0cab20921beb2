"""Accepted connections get TCP_NODELAY (uvicorn --workers N left Nagle on: +40 ms/request)."""

from __future__ import annotations

import socket
from typing import Any

from app.server import NoDelayProtocol, set_nodelay


class FakeTransport:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self.sock if name == "socket" else default


def test_set_nodelay_on_an_accepted_tcp_connection() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        client = socket.create_connection(server.getsockname())
        accepted, _ = server.accept()
        with client, accepted:
            assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 0
            set_nodelay(FakeTransport(accepted))  # type: ignore[arg-type]
            assert accepted.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0


def test_unix_sockets_are_left_alone() -> None:
    a, b = socket.socketpair()
    with a, b:
        set_nodelay(FakeTransport(a))  # type: ignore[arg-type]  # must not raise


def test_serve_uses_the_nodelay_protocol() -> None:
    from app import cli

    assert cli.PROTOCOL == "app.server:NoDelayProtocol"
    assert hasattr(NoDelayProtocol, "connection_made")
