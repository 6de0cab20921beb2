"""Prometheus's HTTP API (``/api/v1/query_range``) on httpx: one call per run window.

A bearer token (``--prometheus-token``, else ``$PROMETHEUS_TOKEN``) is sent when given,
for a Prometheus behind an authenticating proxy.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from app.sources.prometheus import MAX_POINTS, Window

# One answer's bound: two series (profiling, GPU_UTIL) of at most MAX_POINTS + 1 points
# are a few kB; 57 MB answers held four at a time had peaked at 11 GB.
MAX_ANSWER_BYTES = 4 * 1024 * 1024


class PrometheusError(Exception):
    """Prometheus could not be reached, refused the credentials, or refused the query.

    ``fatal``: no other window will fare better (unreachable, 401/403), so stop."""

    def __init__(self, message: str, *, fatal: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.fatal = fatal


class PrometheusClient:
    def __init__(
        self,
        url: str,
        token: str | None = None,
        *,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(
            timeout=httpx.Timeout(timeout), transport=transport, headers=headers
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> PrometheusClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def query_range(self, w: Window) -> dict[str, Any]:
        """The answer's ``data`` (``resultType: matrix``) for the window's query."""
        params = {
            "query": w.query,
            "start": f"{w.start.timestamp():.3f}",
            "end": f"{w.end.timestamp():.3f}",
            "step": f"{w.step:g}",
        }
        try:
            status, body = self._post(params)
        except (httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:
            raise PrometheusError(f"bad --prometheus-url {self.url!r}: {exc}", fatal=True) from exc
        except httpx.TransportError as exc:
            raise PrometheusError(
                f"Prometheus unreachable at {self.url}: {exc or type(exc).__name__}", fatal=True
            ) from exc
        if status in (401, 403):
            raise PrometheusError(
                f"Prometheus at {self.url} refused the credentials ({status}): "
                "pass --prometheus-token or set PROMETHEUS_TOKEN",
                fatal=True,
            )
        answer = _json(body)
        if status != 200 or answer.get("status") != "success":
            reason = answer.get("error") or body[:200].decode(errors="replace") or f"HTTP {status}"
            raise PrometheusError(f"Prometheus refused the query ({status}): {reason}")
        data = answer.get("data")
        if not isinstance(data, dict):
            raise PrometheusError("Prometheus answered a success whose data is not an object")
        return data

    def _post(self, params: dict[str, str]) -> tuple[int, bytes]:
        """The status and body, read as it arrives and refused past MAX_ANSWER_BYTES:
        only ``concurrency`` answers of at most that size are held at once."""
        url = f"{self.url}/api/v1/query_range"
        with self._http.stream("POST", url, data=params) as answer:
            body = bytearray()
            for piece in answer.iter_bytes():
                body += piece
                if len(body) > MAX_ANSWER_BYTES:
                    raise PrometheusError(
                        f"Prometheus answered more than {MAX_ANSWER_BYTES // 1024:,} kB "
                        "for one run's window (the query averages over the GPUs and asks for "
                        f"at most {MAX_POINTS} points: a few kB): not read; check --match"
                    )
            return answer.status_code, bytes(body)


def _json(body: bytes) -> dict[str, Any]:
    try:
        value = json.loads(body)
    except (ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}
