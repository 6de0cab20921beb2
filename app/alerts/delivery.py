"""Webhook delivery: POST JSON, retry connection errors, 429 and 5xx with backoff."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

USER_AGENT = "cadence-alerts/1"


@dataclass(frozen=True)
class DeliveryResult:
    status: str  # delivered | failed
    attempts: int
    response_status: int | None
    error: str | None  # one line per failed attempt


def retryable(status: int) -> bool:
    return status == 429 or status >= 500


def deliver(
    url: str,
    body: dict[str, Any],
    *,
    max_attempts: int,
    timeout_seconds: float,
    backoff_seconds: float,
    sleep: Callable[[float], None] = time.sleep,
    transport: httpx.BaseTransport | None = None,
) -> DeliveryResult:
    """POST ``body`` to ``url`` at most ``max_attempts`` times; never raises.

    2xx is delivered. Connection errors, timeouts, 429 and 5xx are retried after
    ``backoff_seconds`` x 2^(attempt - 1); any other status is final (a 4xx will not get
    better by repeating it). Redirects are not followed.
    """
    problems: list[str] = []
    status: int | None = None
    timeout = httpx.Timeout(timeout_seconds)
    headers = {"User-Agent": USER_AGENT}
    with httpx.Client(timeout=timeout, transport=transport, follow_redirects=False) as client:
        for attempt in range(1, max_attempts + 1):
            try:
                response = client.post(url, json=body, headers=headers)
            except httpx.HTTPError as exc:
                status = None
                problems.append(f"attempt {attempt}: {type(exc).__name__}: {exc}"[:300])
            else:
                status = response.status_code
                if 200 <= status < 300:
                    return DeliveryResult("delivered", attempt, status, _joined(problems))
                problems.append(f"attempt {attempt}: HTTP {status}")
                if not retryable(status):
                    return DeliveryResult("failed", attempt, status, _joined(problems))
            if attempt < max_attempts:
                sleep(backoff_seconds * 2 ** (attempt - 1))
    return DeliveryResult("failed", max_attempts, status, _joined(problems))


def _joined(problems: list[str]) -> str | None:
    return "\n".join(problems) if problems else None
