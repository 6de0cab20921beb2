"""A stored run as the API shows it: a row of ``repository._runs_query`` to the fields of
:class:`~app.runs.schemas.RunOut` (derived hours and dollars included)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from app.runs.schemas import InterruptionOut, RunOut

# A stored run's row (``repository._runs_query``), column by column: ``out_dict`` unpacks
# rows by position. Read by name, the 27 reads of a row cost ~0.5 us each: 16 of the
# 19 ms that 1000 rows took (tests/runs/test_api.py holds this order to the query's).
# fmt: off
ROW_FIELDS = (
    "id", "pipeline", "pipeline_price", "pipeline_metric", "run_id", "variant",
    "started_at", "finished_at", "workers", "gpu_type", "outcome", "retraining_id",
    "gpu_utilization",
    "utilization_source", "gpu_hours", "price_per_gpu_hour", "billed_price_per_gpu_hour",
    "quality_metric", "quality_value", "data_stall_hours", "checkpoint_hours",
    "scheduling_wait_hours", "mfu", "tags", "created_at", "interruption_count",
)
# fmt: on


# It unpacks a 26-column row by position and builds the answer in one frame, for every
# row of a run list page; split to fit (a helper for the derived fields), it ran 4-7%
# more instructions per row (callgrind, 5,000 rows).
# Over 60 lines because a split costs a call per row on the run list's hot path.
def out_dict(row: Sequence[Any], interruptions: list[Any]) -> dict[str, Any]:
    """A stored run (a row of ``repository._runs_query``, in ``ROW_FIELDS`` order) as the
    API returns it: the fields of :class:`RunOut`, as a plain dict.

    Lists serialise these dicts directly with pydantic-core: the values come from our
    own database, validated on the way in, and building 1000 models cost more than the
    query did (pyinstrument: ~35 of ~70 ms for a 1000-run page).
    """
    (
        pk,
        pipeline,
        _pipeline_price,
        pipeline_metric,
        run_id,
        variant,
        started_at,
        finished_at,
        workers,
        gpu_type,
        outcome,
        retraining_id,
        gpu_utilization,
        utilization_source,
        gpu_hours,
        price_per_gpu_hour,
        price,  # billed_price_per_gpu_hour: frozen at ingest, recorded spend never moves
        quality_metric,
        quality_value,
        data_stall_hours,
        checkpoint_hours,
        scheduling_wait_hours,
        mfu,
        tags,
        created_at,
        _interruption_count,
    ) = row
    return {
        "id": pk,
        "pipeline": pipeline,
        "run_id": run_id,
        "variant": variant,
        "started_at": started_at,
        "finished_at": finished_at,
        "workers": workers,
        "gpu_type": gpu_type,
        "outcome": outcome,
        "retraining_id": retraining_id,
        "gpu_utilization": gpu_utilization,
        "utilization_source": utilization_source,
        "gpu_hours": gpu_hours,
        "price_per_gpu_hour": price_per_gpu_hour,
        "quality_metric": quality_metric or pipeline_metric,
        "quality_value": quality_value,
        "data_stall_hours": data_stall_hours,
        "checkpoint_hours": checkpoint_hours,
        "scheduling_wait_hours": scheduling_wait_hours,
        "mfu": mfu,
        "interruptions": [
            {
                "lost_progress_hours": i.lost_progress_hours,
                "resume_hours": i.resume_hours,
                "reschedule_hours": i.reschedule_hours,
                "cause": i.cause,
            }
            for i in interruptions
        ],
        "tags": tags,
        "created_at": created_at,
        # None while the attempt runs (no finish yet; its cost so far is month to date's).
        "wall_clock_hours": (
            None if finished_at is None else (finished_at - started_at).total_seconds() / 3600.0
        ),
        "effective_price_per_gpu_hour": price,
        "cost_usd": gpu_hours * price,
        # Unknown without a utilization figure; all of a failed attempt's hours are idle.
        "idle_gpu_hours": (
            None
            if outcome == "running"
            else gpu_hours
            if outcome != "succeeded"
            else None
            if gpu_utilization is None
            else (1.0 - gpu_utilization) * gpu_hours
        ),
    }


def to_out(row: Sequence[Any], interruptions: list[Any]) -> RunOut:
    """The same as :func:`out_dict`, as a model (for templates and single runs)."""
    data = out_dict(row, interruptions)
    data["interruptions"] = [InterruptionOut.model_construct(**i) for i in data["interruptions"]]
    return RunOut.model_construct(**data)
