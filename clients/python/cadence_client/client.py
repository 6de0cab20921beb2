"""The HTTP client: retries with jittered backoff, ``Retry-After``, typed errors.

**Retries are safe.** ``(pipeline, run_id)`` identifies a run: the server stores a run
once and answers an identical retry with 200 and the stored record (a retry whose body
differs is a 409, never a second row). So the client retries *every* request, writes
included, on connection errors and timeouts (``httpx.TransportError``), on 429 and on
5xx, with exponential backoff and full jitter (a random delay between 0 and
``min(backoff_max, backoff_base * 2 ** (attempt - 1))``), honouring the server's
``Retry-After`` (seconds or an HTTP date; capped at ``backoff_max``). Other 4xx answers
are never retried: they raise a :class:`CadenceAPIError` subclass carrying the status,
the error code, the message, the server's ``fields`` list and the URL. When the attempts
run out the client raises :class:`ServiceUnavailable` with the last cause.
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from email.utils import parsedate_to_datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import httpx

from cadence_client.errors import (
    AuthError,
    CadenceAPIError,
    CadenceClientError,
    ConflictError,
    ServiceUnavailable,
    ValidationFailed,
)

if TYPE_CHECKING:
    from pathlib import Path

    from cadence_client.spool import Spool
    from cadence_client.tracking import TrackedRun

log = logging.getLogger("cadence_client")

__version__ = "0.3.0"
USER_AGENT = f"cadence-client/{__version__}"
RUNS = "/api/v1/runs"
# What a run's ``utilization_source`` may be (the server's ``UtilizationSource``).
UTILIZATION_SOURCES = (
    "nvml_gpu_util",
    "dcgm_gpu_util",
    "dcgm_sm_active",
    "dcgm_gr_engine_active",
    "mfu",
    "other",
)


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


@dataclass(frozen=True)
class BatchResult:
    """What :meth:`CadenceClient.post_runs` stored.

    ``ids`` are the server's ids in the order of the runs you passed; ``items`` are the
    server's per-run entries (``index`` into your list, ``id``, ``run_id``,
    ``pipeline``, ``status``: ``created``, ``existing`` for an identical retry, or
    ``completed`` for a running attempt the post finished).
    """

    created: int = 0
    existing: int = 0
    ids: list[int] = field(default_factory=list)
    items: list[dict[str, Any]] = field(default_factory=list)
    batches: int = 0
    completed: int = 0  # running attempts these posts finished (servers since issue 34)

    @property
    def created_ids(self) -> list[int]:
        return [int(i["id"]) for i in self.items if i.get("status") == "created"]

    @property
    def existing_ids(self) -> list[int]:
        return [int(i["id"]) for i in self.items if i.get("status") == "existing"]


class CadenceClient:
    """A synchronous Cadence client; use it as a context manager (or call :meth:`close`).

    Parameters:
        base_url: where Cadence answers, e.g. ``http://127.0.0.1:8000``.
        token: a bearer token (``ingest`` scope to post; ``read`` when the server
            has ``CADENCE_READ_ACCESS=token``); ``None`` for open reads.
        timeout: seconds for each attempt (connect, read, write and pool).
        max_attempts: attempts per request, the first included (>= 1).
        backoff_base, backoff_max: the backoff before retry *n* is a uniform random
            delay in ``[0, min(backoff_max, backoff_base * 2 ** (n - 1))]``; a
            ``Retry-After`` answer replaces it (capped at ``backoff_max``).
        transport: an httpx transport for the client's own ``httpx.Client`` (tests use
            ``httpx.MockTransport``).
        client: an existing ``httpx.Client`` to send through instead (one you configured
            with proxies, certificates or limits); its own timeout applies and
            :meth:`close` leaves it open.
        sleep, rng, now: the sleep function and random source used between attempts,
            and the clock :meth:`track_run` reads (injectable for tests).
    """

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        *,
        timeout: float = 10.0,
        max_attempts: int = 8,
        backoff_base: float = 0.25,
        backoff_max: float = 10.0,
        transport: httpx.BaseTransport | None = None,
        client: httpx.Client | None = None,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
        now: Callable[[], datetime] = utcnow,
    ) -> None:
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if backoff_base < 0 or backoff_max < 0:
            raise ValueError("backoff_base and backoff_max must not be negative")
        if client is not None and transport is not None:
            raise ValueError("pass either client or transport, not both")
        self.base_url = base_url.rstrip("/")
        self.max_attempts = max_attempts
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.now = now
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._headers = {"User-Agent": USER_AGENT, "Accept": "application/json"}
        if token:
            self._headers["Authorization"] = f"Bearer {token}"
        self._owns_client = client is None
        self._http = client or httpx.Client(timeout=httpx.Timeout(timeout), transport=transport)

    # -- lifecycle -----------------------------------------------------------------

    def close(self) -> None:
        if self._owns_client:
            self._http.close()

    def __enter__(self) -> CadenceClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # -- API -----------------------------------------------------------------------

    def post_run(self, run: Mapping[str, Any]) -> dict[str, Any]:
        """Store one run; returns the stored run with its derived fields.

        The server answers 201 when it stored the run and 200 when an identical run
        was already stored (e.g. an earlier attempt whose answer was lost): both
        return the stored record. Raises :class:`ConflictError` when the run_id is
        stored with different values, :class:`ValidationFailed` for a bad run.
        """
        return self._json_object(self._request("POST", RUNS, body=run))

    def post_runs(self, runs: Sequence[Mapping[str, Any]], batch_size: int = 500) -> BatchResult:
        """Store many runs in batches of ``batch_size`` (each batch all or nothing).

        If a batch is refused, the batches before it stay stored and the error's
        ``batch_offset`` says where the refused batch starts; fix the run and send
        the whole list again (stored runs come back as ``existing``).
        """
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        created = existing = batches = completed = 0
        ids: list[int] = []
        items: list[dict[str, Any]] = []
        for offset in range(0, len(runs), batch_size):
            chunk = [dict(r) for r in runs[offset : offset + batch_size]]
            try:
                response = self._request("POST", f"{RUNS}/batch", body={"runs": chunk})
            except CadenceAPIError as exc:
                exc.batch_offset = offset
                exc.fields = [_shift_field(f, offset) for f in exc.fields]
                raise
            body = self._json_object(response)
            created += int(body.get("created", 0))
            existing += int(body.get("existing", 0))
            completed += int(body.get("completed", 0))
            batches += 1
            for item in sorted(body.get("runs", []), key=lambda i: int(i.get("index", 0))):
                item = {**item, "index": int(item.get("index", 0)) + offset}
                items.append(item)
                ids.append(int(item["id"]))
        return BatchResult(
            created=created, existing=existing, ids=ids, items=items, batches=batches,
            completed=completed,
        )  # fmt: skip

    def post_evaluations(
        self, pipeline: str, evaluations: Sequence[Mapping[str, Any]]
    ) -> dict[str, Any]:
        """Store up to 1000 evaluations of a pipeline's serving model, all or nothing.

        Each is ``{"run_id", "evaluated_at" (aware datetime or ISO text), "value"}`` plus
        an optional ``metric``. Safe to retry: stored ones come back as ``existing``.
        Raises :class:`ConflictError` when one is stored with a different value.
        """
        body = {"evaluations": [dict(e) for e in evaluations]}
        path = f"/api/v1/pipelines/{quote(pipeline, safe='')}/evaluations"
        return self._json_object(self._request("POST", path, body=body))

    def update_measurements(
        self, pipeline: str, runs: Sequence[Mapping[str, Any]], batch_size: int = 1000
    ) -> dict[str, int]:
        """Change stored runs' measurements, ``batch_size`` runs a request (each all or
        nothing): each item is ``{"run_id", ...}`` with any of ``gpu_utilization``,
        ``utilization_source``, ``mfu``, ``data_stall_hours``, ``checkpoint_hours``.
        Returns ``{"updated", "unchanged"}`` summed over the batches; a refused batch
        raises with ``batch_offset`` set, the batches before it kept.
        """
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        path = f"/api/v1/pipelines/{quote(pipeline, safe='')}/measurements"
        totals = {"updated": 0, "unchanged": 0}
        for offset in range(0, len(runs), batch_size):
            chunk = [dict(r) for r in runs[offset : offset + batch_size]]
            try:
                body = self._json_object(self._request("POST", path, body={"runs": chunk}))
            except CadenceAPIError as exc:
                exc.batch_offset = offset
                exc.fields = [_shift_field(f, offset) for f in exc.fields]
                raise
            for key in totals:
                totals[key] += int(body.get(key, 0))
        return totals

    def track_run(
        self,
        *,
        pipeline: str,
        run_id: str,
        workers: int,
        sample_gpu: bool = False,
        sample_interval: float = 5.0,
        strict: bool = False,
        spool: Spool | str | Path | None = None,
        handle_sigterm: bool = True,
        report_start: bool = True,
        **fields: Any,
    ) -> TrackedRun:
        """A context manager that records one training attempt and posts it on exit.

        ``started_at`` is read on entry and reported at once (``outcome: "running"``:
        this month's spend counts the run while it runs; ``report_start=False`` posts
        only the finish), and ``finished_at`` on exit completes it; ``fields`` are any
        other run fields (``variant``, ``retraining_id``, ``gpu_utilization``, ``tags``...),
        and the job can add or change them with ``run.set(...)``. The outcome is
        recorded whatever happens: an exception is ``failed`` (tag ``cadence_error`` =
        its type; the exception is re-raised), KeyboardInterrupt ``cancelled``, SIGTERM
        ``preempted`` (posted from the handler, which is installed in the main thread
        only, chains to the previous handler and is restored on exit; pass
        ``handle_sigterm=False`` to leave signals alone). ``gpu_utilization`` is left out
        when neither the job nor the sampler knows it.

        A run that cannot be posted (server unreachable after the retries, token
        refused) is written to ``spool`` (a directory; default ``CADENCE_SPOOL_DIR`` or a
        per-user cache directory) and sent by the next successful post or ``cadence
        spool flush``: the job is never failed by Cadence unless ``strict=True``. With
        ``sample_gpu=True`` utilization is sampled through NVML (``pip install
        cadence-gpu-client[nvml]``) unless the job sets it.
        """
        from cadence_client.tracking import TrackedRun

        return TrackedRun(
            self,
            {"pipeline": pipeline, "run_id": run_id, "workers": workers, **fields},
            sample_gpu=sample_gpu,
            sample_interval=sample_interval,
            strict=strict,
            spool=spool,
            handle_sigterm=handle_sigterm,
            report_start=report_start,
        )

    def list_runs(
        self,
        pipeline: str | None = None,
        variant: str | None = None,
        limit: int = 1000,
        *,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> Iterator[dict[str, Any]]:
        """Every matching run, newest first, fetched ``limit`` per page (at most 1000).

        Pages are fetched lazily as you iterate, following ``next_cursor``.
        ``since``/``until`` bound ``started_at`` (``since <= started_at < until``) and
        need a UTC offset.
        """
        params: dict[str, str | int] = {"limit": limit}
        if pipeline is not None:
            params["pipeline"] = pipeline
        if variant is not None:
            params["variant"] = variant
        if since is not None:
            params["since"] = since.isoformat()
        if until is not None:
            params["until"] = until.isoformat()
        while True:
            page = self._json_object(self._request("GET", RUNS, params=params))
            yield from page.get("runs", [])
            cursor = page.get("next_cursor")
            if not cursor:
                return
            params["cursor"] = str(cursor)

    def list_pipelines(self) -> list[dict[str, Any]]:
        """Every pipeline with its settings (price, budget, cadence, quality metric)."""
        body = self._json_object(self._request("GET", "/api/v1/pipelines"))
        return [dict(p) for p in body.get("pipelines", [])]

    def projection(self, pipeline: str, **params: Any) -> dict[str, Any]:
        """``GET /api/v1/pipelines/{pipeline}/projection`` with its query parameters
        (``cadences="1,2"``, ``price``, ``utilization_target``, ``workers``,
        ``failure_rate``, ``weeks_per_month``...); ``None`` values are left out."""
        query: dict[str, str | int] = {
            k: _query_value(v) for k, v in params.items() if v is not None
        }
        path = f"/api/v1/pipelines/{pipeline}/projection"
        return self._json_object(self._request("GET", path, params=query))

    def org_plan(self, **params: Any) -> dict[str, Any]:
        """``GET /api/v1/portfolio/plan`` (``budget``, ``risk``, ``team``; ``None`` values
        are left out): the organisation's cadence plan."""
        query = {k: _query_value(v) for k, v in params.items() if v is not None}
        return self._json_object(self._request("GET", "/api/v1/portfolio/plan", params=query))

    def health(self) -> bool:
        """Whether the service is ready (``/readyz``: database reachable, schema at head).

        One attempt, no retries; any failure is ``False``.
        """
        try:
            response = self._http.get(self._url("/readyz"), headers=self._headers)
        except httpx.TransportError:
            return False
        return response.status_code == 200

    # -- machinery -----------------------------------------------------------------

    def _url(self, path: str) -> str:
        return self.base_url + path

    def _request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: Mapping[str, str | int] | None = None,
    ) -> httpx.Response:
        """Send with retries; returns a 2xx answer or raises a :class:`CadenceClientError`."""
        headers = dict(self._headers)
        content: bytes | None = None
        if body is not None:
            content = _encode_json(body)
            headers["Content-Type"] = "application/json"
        url = self._url(path)
        cause: Exception | None = None
        for attempt in range(1, self.max_attempts + 1):
            retry_after: float | None = None
            try:
                response = self._http.request(
                    method, url, content=content, params=params, headers=headers
                )
            except httpx.UnsupportedProtocol:
                raise  # a wrong base_url: retrying cannot help
            except httpx.TransportError as exc:
                cause = exc
                reason = f"{type(exc).__name__}: {exc}"
            else:
                if response.is_success:
                    return response
                error = _api_error(response, method, url)
                if not _retryable(response.status_code):
                    raise error
                cause = error
                reason = f"{response.status_code} {error.code}"
                retry_after = _retry_after(response.headers.get("Retry-After"))
            if attempt == self.max_attempts:
                break
            self._wait(attempt, retry_after, f"{method} {url} failed ({reason})")
        assert cause is not None
        raise self._gave_up(method, url, cause) from cause

    def _wait(self, attempt: int, retry_after: float | None, failed: str) -> None:
        """Log the failed attempt and sleep the backoff before the next one."""
        delay = self._delay(attempt, retry_after)
        log.warning(
            "cadence %s; retry %d/%d in %.2fs", failed, attempt, self.max_attempts - 1, delay
        )
        self._sleep(delay)

    def _gave_up(self, method: str, url: str, cause: Exception) -> ServiceUnavailable:
        if isinstance(cause, CadenceClientError):
            last = cause.message  # its status and code lead the error's own text
        else:
            last = f"{type(cause).__name__}: {cause}"
        return ServiceUnavailable(
            f"failed after {self.max_attempts} attempts; last error: {last}",
            attempts=self.max_attempts,
            cause=cause,
            method=method,
            url=url,
        )

    @contextmanager
    def hurried(self, attempts: int = 2, backoff_max: float = 1.0) -> Iterator[None]:
        """Fewer attempts and shorter waits for a while: a preempted job posts within the
        grace period (Kubernetes' default is 30 s; two attempts of ``timeout`` each plus
        at most ``backoff_max`` fit within it at the default 10 s timeout)."""
        saved = self.max_attempts, self.backoff_max
        self.max_attempts = min(self.max_attempts, attempts)
        self.backoff_max = min(self.backoff_max, backoff_max)
        try:
            yield
        finally:
            self.max_attempts, self.backoff_max = saved

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        if retry_after is not None:
            return min(retry_after, self.backoff_max)
        ceiling = min(self.backoff_max, self.backoff_base * 2 ** (attempt - 1))
        return self._rng.uniform(0, ceiling)

    @staticmethod
    def _json_object(response: httpx.Response) -> dict[str, Any]:
        method, url = response.request.method, str(response.request.url)
        try:
            body = response.json()
        except ValueError as exc:
            raise CadenceAPIError(
                f"expected a JSON object, got {response.text[:200]!r}",
                status=response.status_code,
                code="bad_response",
                method=method,
                url=url,
            ) from exc
        if not isinstance(body, dict):
            raise CadenceAPIError(
                f"expected a JSON object, got {type(body).__name__}",
                status=response.status_code,
                code="bad_response",
                method=method,
                url=url,
            )
        return body


def _retryable(status: int) -> bool:
    return status == 429 or status >= 500


def _api_error(response: httpx.Response, method: str, url: str) -> CadenceAPIError:
    """The error a non-2xx answer stands for, from Cadence's ``{"error": {...}}`` body."""
    status = response.status_code
    code, fields = f"http_{status}", []
    message = response.text.strip()[:500] or response.reason_phrase or "error"
    try:
        error = response.json().get("error")
    except (ValueError, AttributeError):  # not JSON, or not an object
        error = None
    if isinstance(error, dict):
        code = str(error.get("code") or code)
        message = str(error.get("message") or message)
        raw_fields = error.get("fields")
        if isinstance(raw_fields, list):
            fields = [f for f in raw_fields if isinstance(f, dict)]
    cls: type[CadenceAPIError] = CadenceAPIError
    if status == 422:
        cls = ValidationFailed
    elif status == 409:
        cls = ConflictError
    elif status in (401, 403):
        cls = AuthError
    return cls(
        message,
        status=status,
        code=code,
        fields=fields,
        headers=response.headers,
        method=method,
        url=url,
    )


def _retry_after(value: str | None) -> float | None:
    """``Retry-After`` as seconds (delta-seconds or an HTTP date); ``None`` if absent/bad."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - utcnow()).total_seconds())


def _shift_field(item: Mapping[str, Any], offset: int) -> dict[str, Any]:
    """``runs.3.gpu_utilization`` in a batch starting at 500 -> ``runs.503.gpu_utilization``."""
    shifted = dict(item)
    parts = str(item.get("field", "")).split(".")
    if offset and len(parts) > 1 and parts[0] == "runs" and parts[1].isdigit():
        parts[1] = str(int(parts[1]) + offset)
        shifted["field"] = ".".join(parts)
    return shifted


def _query_value(value: Any) -> str | int:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(str(v) for v in value)
    return value if isinstance(value, (int, str)) else str(value)


def _json_default(value: Any) -> Any:
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    raise TypeError(f"cannot send {type(value).__name__} as JSON")


def _encode_json(body: Any) -> bytes:
    """Compact JSON; datetimes as ISO 8601. NaN and Infinity are refused here (the
    server refuses them too) rather than sent as invalid JSON."""
    return json.dumps(
        body, default=_json_default, allow_nan=False, separators=(",", ":"), ensure_ascii=False
    ).encode()
