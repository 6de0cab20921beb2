"""Prometheus's HTTP API (``/api/v1/query_range``) on httpx: one call per run window.

A bearer token (``--prometheus-token``, else ``$PROMETHEUS_TOKEN``) is sent when given,
for a Prometheus behind an authenticating proxy.
"""

from __future__ import annotations

from typing import Any

import httpx

from app.sources.prometheus import Window


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
            answer = self._http.post(f"{self.url}/api/v1/query_range", data=params)
        except (httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:
            raise PrometheusError(f"bad --prometheus-url {self.url!r}: {exc}", fatal=True) from exc
        except httpx.TransportError as exc:
            raise PrometheusError(
                f"Prometheus unreachable at {self.url}: {exc or type(exc).__name__}", fatal=True
            ) from exc
        if answer.status_code in (401, 403):
            raise PrometheusError(
                f"Prometheus at {self.url} refused the credentials ({answer.status_code}): "
                "pass --prometheus-token or set PROMETHEUS_TOKEN",
                fatal=True,
            )
        body = _json(answer)
        if answer.status_code != 200 or body.get("status") != "success":
            reason = body.get("error") or answer.text[:200] or f"HTTP {answer.status_code}"
            raise PrometheusError(f"Prometheus refused the query ({answer.status_code}): {reason}")
        data = body.get("data")
        return data if isinstance(data, dict) else {}


def _json(answer: httpx.Response) -> dict[str, Any]:
    try:
        body = answer.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}
