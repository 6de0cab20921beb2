"""MLflow metric history -> Cadence evaluations, when the mapping names a metric.

A monitoring job that logs the serving model's quality against the training run (the
same MLflow run id) leaves a history of (timestamp, value); the values logged after the
run finished are that model's quality at its age, which is what Cadence's decay fit
needs. Values from before the end (training-time logging) are left out.
"""

from __future__ import annotations

import math
from datetime import datetime, timezone
from typing import Any

from cadence_client.client import CadenceClient
from cadence_client.mlflow.mapping import Mapped
from cadence_client.mlflow.mlflow_api import MlflowClient

BATCH = 1000


def evaluations_of(mlflow: MlflowClient, ready: list[Mapped], key: str) -> list[dict[str, Any]]:
    out = []
    for m in ready:
        if m.payload is None:
            continue
        finished = datetime.fromisoformat(m.payload["finished_at"])
        for ms, value in mlflow.metric_history(m.run_id, key):
            at = datetime.fromtimestamp(ms / 1000, tz=timezone.utc)
            if at >= finished and math.isfinite(value):
                out.append({"run_id": m.run_id, "evaluated_at": at.isoformat(), "value": value})
    return out


def post(client: CadenceClient, pipeline: str, items: list[dict[str, Any]]) -> tuple[int, int]:
    """(created, existing); raises the client's errors for the caller to report."""
    created = existing = 0
    for offset in range(0, len(items), BATCH):
        body = client.post_evaluations(pipeline, items[offset : offset + BATCH])
        created, existing = created + int(body["created"]), existing + int(body["existing"])
    return created, existing
