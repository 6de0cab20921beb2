"""One webhook attempt: check where the URL resolves, POST the JSON there, classify.

Never raises. Connection errors, timeouts, DNS failures, 429 and 5xx are worth another
attempt later (the sender schedules it); any other answer, and a refused target, is
final (a 4xx will not get better by repeating it). Redirects are not followed: a
redirect could lead to an address the check refused.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

import httpx

from app.alerts.targets import (
    RefusedTarget,
    Resolver,
    checked_address,
    default_port,
    system_resolver,
)

USER_AGENT = "cadence-alerts/1"
Outcome = Literal["delivered", "retry", "failed"]


@dataclass(frozen=True)
class Attempt:
    outcome: Outcome
    response_status: int | None
    error: str | None  # for admins: what went wrong, one line


def retryable(status: int) -> bool:
    return status == 429 or status >= 500


def attempt(
    url: str,
    body: dict[str, Any],
    *,
    delivery_id: int,
    timeout_seconds: float,
    allowed_hosts: Iterable[str] = (),
    resolve: Resolver = system_resolver,
    transport: httpx.BaseTransport | None = None,
) -> Attempt:
    """POST ``body`` to ``url`` once, connecting to the address that was just checked
    (so a DNS answer that changes between the check and the connection cannot send the
    request elsewhere). ``X-Cadence-Delivery`` lets a receiver drop a repeat."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    try:
        address = checked_address(host, parts.port or default_port(parts.scheme),
                                  allowed_hosts, resolve)  # fmt: skip
    except RefusedTarget as exc:
        return Attempt("failed", None, str(exc))
    except (OSError, UnicodeError) as exc:
        return Attempt("retry", None, f"cannot resolve the host: {exc}"[:300])
    target = httpx.URL(url).copy_with(host=address)
    headers = {
        "User-Agent": USER_AGENT,
        "Host": parts.netloc.rpartition("@")[2],
        "X-Cadence-Delivery": str(delivery_id),
    }
    extensions = {"sni_hostname": host} if parts.scheme == "https" else {}
    try:
        with httpx.Client(
            timeout=httpx.Timeout(timeout_seconds), transport=transport, follow_redirects=False
        ) as client:
            response = client.post(target, json=body, headers=headers, extensions=extensions)
    except httpx.HTTPError as exc:
        return Attempt("retry", None, f"{type(exc).__name__}: {exc}"[:300])
    status = response.status_code
    if 200 <= status < 300:
        return Attempt("delivered", status, None)
    return Attempt("retry" if retryable(status) else "failed", status, f"HTTP {status}")
