"""A run sent again against the stored one: which fields differ, and the 409 naming them.

An identical retry is a no-op; a changed one is a conflict whose reasons say what was
sent and what is stored (a field the retry left out takes its default). A measurement
changed since ingest (``cadence enrich prometheus``, a measurements PATCH; recorded in
run_measurement_change) is not a conflict: the run posted again as first sent is the
same run, and the stored, enriched value stays.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from app.db.models import Run
from app.exceptions import Conflict
from app.pipelines.service import PipelineRef
from app.runs.schemas import RunIn
from app.runs.validation import stored_values

COMPARED = (
    "variant",
    "started_at",
    "finished_at",
    "workers",
    "gpu_type",
    "outcome",
    "retraining_id",
    "gpu_hours",
    "gpu_utilization",
    "utilization_source",
    "price_per_gpu_hour",
    "quality_metric",
    "quality_value",
    "data_stall_hours",
    "checkpoint_hours",
    "scheduling_wait_hours",
    "mfu",
    "tags",
)


def raise_conflicts(
    runs: list[RunIn],
    pipelines: dict[str, PipelineRef],
    existing: dict[tuple[int, str], Run],
    prefix: Callable[[int], str],
    first: dict[tuple[str, str], int],
    changed: Callable[[list[int]], dict[int, set[str]]] = lambda _: {},
) -> None:
    """A 409 naming each field in which a run differs from the stored run of its key
    (``existing``: the stored runs by (pipeline id, run_id)); nothing if none differs.
    ``changed``: the fields changed since ingest of these stored runs (read only when
    some run differs), which are not conflicts."""
    found = []
    for run in runs:
        row = existing.get((pipelines[run.pipeline].id, run.run_id))
        if row is None:
            continue
        if run.outcome == "running" and row.outcome != "running":
            _raise_finished(run, row, prefix(first[(run.pipeline, run.run_id)]))
        metric = pipelines[run.pipeline].quality_metric
        stored = _row_values(row)
        differing = differences(stored, row, run, default_metric=metric)
        if differing:
            found.append((run, row, stored, differing))
    since = changed([row.id for _, row, _, _ in found]) if found else {}
    fields = []
    for run, row, stored, every in found:
        differing = [name for name in every if name not in since.get(row.id, set())]
        if differing:
            index = first[(run.pipeline, run.run_id)]
            fields += [
                {"field": prefix(index) + name, "reason": _conflict_reason(name, stored, run)}
                for name in differing
            ]
            message = (
                f"run {run.run_id!r} of pipeline {run.pipeline!r} already exists with different "
                f"{', '.join(differing)}; use a new run_id, or DELETE the old run first"
            )
    if fields:
        raise Conflict(
            message
            if len(runs) == 1
            else "some runs already exist with different values: " + message,
            fields=fields,
        )


def _raise_finished(run: RunIn, row: Run, prefix: str) -> None:
    """A report of an attempt's start after its finish: the stored finish stands."""
    finished = row.finished_at.isoformat() if row.finished_at else "?"
    raise Conflict(
        f"run {run.run_id!r} of pipeline {run.pipeline!r} has already finished "
        f"({row.outcome} at {finished}): a 'running' report after its finish is refused",
        fields=[
            {
                "field": prefix + "outcome",
                "reason": f"the stored attempt finished ({row.outcome}); it cannot run again",
            }
        ],
    )


def _row_values(row: Run) -> dict[str, Any]:
    return {name: getattr(row, name) for name in COMPARED}


def _conflict_reason(name: str, stored: dict[str, Any], run: RunIn) -> str:
    """Why a field conflicts, in terms of what was sent: a field the retry left out takes
    its default, which is not what the stored run holds (a 409 naming a field nobody sent
    would otherwise read as a server mistake)."""
    if name == "interruptions" or name not in stored:
        return "differs from the stored run"
    was = stored[name]
    if name not in run.model_fields_set and name in RunIn.model_fields:
        return (
            f"not sent, so it defaults to {stored_values(run).get(name)!r}, but the stored "
            f"run has {was!r}: send the stored value, or use a new run_id"
        )
    return f"the stored run has {was!r}; this request sends {stored_values(run).get(name)!r}"


def differences(
    stored: dict[str, Any],
    stored_source: Run | RunIn,
    incoming: RunIn,
    default_metric: str | None = None,
) -> list[str]:
    """Names of the fields whose stored and incoming values differ.

    A run stored without a quality metric is shown with its pipeline's; sending that
    shown value back (an export re-imported) is the same run, not a conflict.
    """
    new = stored_values(incoming)
    if default_metric is not None:
        stored = {**stored, "quality_metric": stored["quality_metric"] or default_metric}
        new["quality_metric"] = new["quality_metric"] or default_metric
    differing = [name for name in COMPARED if not _same(stored[name], new[name])]
    old_interruptions = [
        (i.lost_progress_hours, i.resume_hours, i.reschedule_hours, i.cause)
        for i in stored_source.interruptions
    ]
    new_interruptions = [
        (i.lost_progress_hours, i.resume_hours, i.reschedule_hours, i.cause)
        for i in incoming.interruptions
    ]
    if len(old_interruptions) != len(new_interruptions) or not all(
        all(_same(a, b) for a, b in zip(x, y, strict=True))
        for x, y in zip(old_interruptions, new_interruptions, strict=True)
    ):
        differing.append("interruptions")
    return differing


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float | int):
        return math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-12)
    return bool(a == b)
