"""Where a webhook may point, and what a reader may see of it.

A webhook is a request the server makes on an admin's behalf: pointed at
``169.254.169.254`` it would read cloud credentials, at ``127.0.0.1:5432`` it would probe
internal ports. So targets are refused unless they are public (``is_global``), both
when a rule is saved (literal addresses and ``localhost``) and at every send, after
resolving the name (a name that resolved to a public address when the rule was saved
can resolve to a private one later: DNS rebinding). The send then connects to the very
address that was checked. Hosts listed in ``CADENCE_WEBHOOK_ALLOWED_HOSTS``
(``host[:port]``) are exempt, e.g. an internal chat server.

Readers see a webhook as scheme and host only: the path and the ``user:pass@`` part
carry secrets (a Slack webhook path is its token).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Iterable
from urllib.parse import urlsplit

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], list[str]]
LOCAL_NAMES = ("localhost", "localhost.localdomain")


def default_port(scheme: str) -> int:
    return 443 if scheme == "https" else 80


def is_allowed(host: str, port: int, allowed: Iterable[str]) -> bool:
    """Whether ``host`` (any port) or ``host:port`` is listed; IPv6 as ``[::1]:8080``."""
    host = host.lower()
    shown = f"[{host}]" if ":" in host else host
    return any(item in (host, shown, f"{shown}:{port}") for item in allowed)


NAT64 = ipaddress.ip_network("64:ff9b::/96")
IPV4_COMPATIBLE = ipaddress.ip_network("::/96")


def embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one carries on to (mapped, 6to4, NAT64, compatible):
    ``64:ff9b::a9fe:a9fe`` reaches 169.254.169.254 through a NAT64 gateway."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:
        return address.sixtofour
    if address in NAT64 or (address in IPV4_COMPATIBLE and int(address) > 1):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


def address_problem(address: IPAddress) -> str | None:
    """Why a webhook must not go to ``address`` (None: a public address)."""
    if isinstance(address, ipaddress.IPv6Address):
        address = embedded_ipv4(address) or address  # ::ffff:127.0.0.1 is 127.0.0.1
    if address.is_loopback:
        return "a loopback address"
    if address.is_link_local:
        return "a link-local address (cloud metadata lives there)"
    if address.is_multicast or address.is_unspecified:
        return "not a unicast address"
    if not address.is_global:  # private, shared (100.64/10), unique-local (fd00::/8) ...
        return "a private or reserved address"
    return None


def literal_address(host: str) -> IPAddress | None:
    """The address ``host`` spells, including the legacy forms ``2130706433`` and
    ``0x7f.1`` that resolvers accept for 127.0.0.1; None for a name."""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    try:
        return ipaddress.IPv4Address(socket.inet_aton(host))
    except OSError:
        return None


def saved_target_problem(url: str, allowed: Iterable[str]) -> str | None:
    """Why a rule may not be saved with ``url`` (checked before any DNS look-up)."""
    parts = urlsplit(url)
    host = (parts.hostname or "").rstrip(".")
    port = parts.port or default_port(parts.scheme)
    if is_allowed(host, port, allowed):
        return None
    if host.lower() in LOCAL_NAMES or host.lower().endswith(".localhost"):
        return _refusal("a loopback name")
    address = literal_address(host)
    problem = None if address is None else address_problem(address)
    return None if problem is None else _refusal(problem)


def _refusal(problem: str) -> str:
    return (
        f"webhook target is {problem}; list the host in CADENCE_WEBHOOK_ALLOWED_HOSTS to allow it"
    )


def system_resolver(host: str, port: int) -> list[str]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


class RefusedTarget(Exception):
    """The webhook's host resolves to an address it may not reach."""


def checked_address(
    host: str, port: int, allowed: Iterable[str], resolve: Resolver = system_resolver
) -> str:
    """The address to connect to for ``host``: resolved now, every answer checked.

    Raises RefusedTarget when any answer is refused (a name with one private answer
    among public ones is refused too), OSError when the name does not resolve.
    """
    literal = literal_address(host)
    answers = [str(literal)] if literal is not None else resolve(host, port)
    if not answers:
        raise OSError(f"{host} has no address")
    if is_allowed(host, port, allowed):
        return answers[0]
    for answer in answers:
        problem = address_problem(ipaddress.ip_address(answer.split("%")[0]))
        if problem is not None:
            raise RefusedTarget(_refusal(problem))
    return answers[0]


def masked(url: str) -> str:
    """What a reader sees: ``https://hooks.slack.com`` (no path, port or credentials)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    return f"{parts.scheme}://[{host}]" if ":" in host else f"{parts.scheme}://{host}"
