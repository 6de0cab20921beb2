"""A minimal client for the MLflow tracking server's REST API (``/api/2.0/mlflow``),
on httpx only: the ``mlflow`` package is not needed.

Credentials follow MLflow's own environment variables: ``MLFLOW_TRACKING_TOKEN``
(bearer), else ``MLFLOW_TRACKING_USERNAME`` / ``MLFLOW_TRACKING_PASSWORD`` (basic).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import httpx

API = "/api/2.0/mlflow"
PAGE_SIZE = 1000
# A search that never ends (a new next_page_token forever) stops here: 200 pages of
# 1,000 are 200,000 runs, more than any one experiment this importer was used on.
MAX_PAGES = 200


class MlflowError(Exception):
    """MLflow answered with an error, or could not be reached or understood.

    ``error_code`` is MLflow's (e.g. ``RESOURCE_DOES_NOT_EXIST``), ``unreachable``
    whether no answer came back at all, ``status`` the HTTP status when one did.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        error_code: str = "",
        unreachable: bool = False,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.error_code = error_code
        self.unreachable = unreachable


class ExperimentNotFound(MlflowError):
    """No experiment of that name."""


class MlflowClient:
    """``with MlflowClient("http://mlflow:5000") as m: m.search_runs(m.experiment_id(name))``.

    ``transport`` (e.g. ``httpx.MockTransport``) or ``client`` (an ``httpx.Client`` you
    configured; left open on close) may be injected.
    """

    def __init__(
        self,
        tracking_uri: str,
        *,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
        client: httpx.Client | None = None,
    ) -> None:
        if client is not None and transport is not None:
            raise ValueError("pass either client or transport, not both")
        self.tracking_uri = tracking_uri.rstrip("/")
        self._headers = {"Accept": "application/json"}
        auth: httpx.BasicAuth | None = None
        token = os.environ.get("MLFLOW_TRACKING_TOKEN")
        user = os.environ.get("MLFLOW_TRACKING_USERNAME")
        if token:
            self._headers["Authorization"] = f"Bearer {token}"
        elif user:
            auth = httpx.BasicAuth(user, os.environ.get("MLFLOW_TRACKING_PASSWORD", ""))
        self._owns_client = client is None
        self._http = client or httpx.Client(
            timeout=httpx.Timeout(timeout), transport=transport, auth=auth
        )

    def close(self) -> None:
        if self._owns_client:
            self._http.close()

    def __enter__(self) -> MlflowClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def experiment_id(self, name: str) -> str:
        """The id of the experiment named ``name``; :class:`ExperimentNotFound` if none."""
        try:
            body = self._call("GET", "experiments/get-by-name", params={"experiment_name": name})
        except MlflowError as exc:
            if exc.error_code == "RESOURCE_DOES_NOT_EXIST" or (
                exc.status == 404 and not exc.error_code
            ):
                raise ExperimentNotFound(
                    f"experiment {name!r} not found at {self.tracking_uri}",
                    status=exc.status,
                    error_code=exc.error_code,
                ) from exc
            raise
        experiment = body.get("experiment")
        if not isinstance(experiment, dict) or "experiment_id" not in experiment:
            raise MlflowError(f"experiments/get-by-name answered without an experiment: {body}")
        return str(experiment["experiment_id"])

    def search_runs(self, experiment_id: str) -> Iterator[dict[str, Any]]:
        """Every (active) run of the experiment, following ``next_page_token``."""
        token: str | None = None
        seen: set[str] = set()
        for _page in range(MAX_PAGES):
            request: dict[str, Any] = {"experiment_ids": [experiment_id], "max_results": PAGE_SIZE}
            if token:
                request["page_token"] = token
            body = self._call("POST", "runs/search", json=request)
            runs = body.get("runs", [])
            if not isinstance(runs, list):
                raise MlflowError("runs/search answered with a 'runs' that is not a list")
            for run in runs:
                if isinstance(run, dict):
                    yield run
            token = body.get("next_page_token") or None
            if token is None:
                return
            if token in seen:
                raise MlflowError(
                    "runs/search returned the same next_page_token twice: the search would "
                    "never end; nothing was imported"
                )
            seen.add(token)
        raise MlflowError(
            f"runs/search was still paging after {MAX_PAGES} pages of {PAGE_SIZE} runs: "
            "stopped, nothing was imported"
        )

    def metric_history(self, run_id: str, key: str) -> list[tuple[int, float]]:
        """(timestamp in ms, value) of every logged value of a run's metric."""
        body = self._call(
            "GET", "metrics/get-history", params={"run_id": run_id, "metric_key": key}
        )
        out = []
        for m in body.get("metrics") or []:
            if isinstance(m, dict) and isinstance(m.get("timestamp"), (int, str)):
                try:
                    out.append((int(m["timestamp"]), float(m["value"])))
                except (KeyError, TypeError, ValueError):
                    continue
        return out

    def _call(self, method: str, endpoint: str, **kwargs: Any) -> dict[str, Any]:
        url = f"{self.tracking_uri}{API}/{endpoint}"
        try:
            response = self._http.request(method, url, headers=self._headers, **kwargs)
        except (httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:
            raise MlflowError(f"bad --tracking-uri {self.tracking_uri!r}: {exc}") from exc
        except httpx.TransportError as exc:
            raise MlflowError(
                f"cannot reach the MLflow tracking server at {self.tracking_uri}: "
                f"{exc or type(exc).__name__}",
                unreachable=True,
            ) from exc
        try:
            body = response.json()
        except ValueError:
            body = None
        if response.is_error:
            if isinstance(body, dict) and ("error_code" in body or "message" in body):
                code = str(body.get("error_code", ""))
                message = str(body.get("message", "")) or response.reason_phrase
                raise MlflowError(
                    f"MLflow {endpoint} answered {response.status_code} {code}: {message}",
                    status=response.status_code,
                    error_code=code,
                )
            raise MlflowError(
                f"MLflow {endpoint} answered {response.status_code} "
                f"{response.reason_phrase}: {response.text[:200]}",
                status=response.status_code,
            )
        if not isinstance(body, dict):
            raise MlflowError(
                f"{url} did not answer with a JSON object; is {self.tracking_uri} an MLflow "
                "tracking server?",
                status=response.status_code,
            )
        return body
