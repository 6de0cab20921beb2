"""Run records as pipelines send them and as the API returns them."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, field_validator

from app.schemas_common import (
    TINY,
    Fraction,
    Identifier,
    NonNegative,
    OutModel,
    Slug,
    StrictModel,
    Text,
    Timestamp,
    snap_tiny,
)

MAX_TAGS = 50
TagKey = Annotated[Identifier, Field(min_length=1, max_length=100)]
TagValue = Annotated[Text, Field(max_length=500)]


# What the utilization number measures: "GPU utilization" differs by metric (NVML's and
# DCGM's utilization.gpu count any kernel running; DCGM's SM activity and graphics-engine
# activity count how busy the chip is), so runs measured differently don't compare.
UTILIZATION_SOURCES = (
    "nvml_gpu_util",
    "dcgm_gpu_util",
    "dcgm_sm_active",
    "dcgm_gr_engine_active",
    "mfu",
    "other",
)
UtilizationSource = Literal[
    "nvml_gpu_util", "dcgm_gpu_util", "dcgm_sm_active", "dcgm_gr_engine_active", "mfu", "other"
]


# An attempt's outcome (methodology.md §2): every attempt is paid for; only a succeeded
# one delivers a model. Kubernetes' and spot reclaimers' SIGTERM is "preempted".
# "running": an attempt reported at its start, without finished_at, completed later by
# a post of the same (pipeline, run_id) with its finish and final outcome.
OUTCOMES = ("succeeded", "failed", "preempted", "cancelled", "running")
FINAL_OUTCOMES = OUTCOMES[:4]
Outcome = Literal["succeeded", "failed", "preempted", "cancelled", "running"]


class InterruptionIn(StrictModel):
    lost_progress_hours: NonNegative = Field(
        0.0, description="Progress lost since the last checkpoint (tch), hours."
    )
    resume_hours: NonNegative = Field(0.0, description="Time to resume training (trm), hours.")
    reschedule_hours: NonNegative = Field(
        0.0, description="Time to get resources back (tre), hours."
    )
    cause: Annotated[Text, Field(max_length=200)] | None = None


class RunIn(StrictModel):
    pipeline: Slug = Field(description="Pipeline slug; unknown pipelines are created.")
    run_id: Annotated[Identifier, Field(min_length=1, max_length=200)] = Field(
        description="Your id for the run, unique per pipeline: retries with it are safe."
    )
    variant: Annotated[Identifier, Field(min_length=1, max_length=64)] = "baseline"
    started_at: Timestamp
    finished_at: Timestamp | None = Field(
        None,
        description="When the attempt ended. Required, except for an attempt reported at "
        "its start (outcome 'running'), which has none yet.",
    )
    workers: int = Field(ge=1, le=100_000)
    gpu_type: Annotated[Identifier, Field(max_length=64)] = ""
    outcome: Outcome = Field(
        "succeeded",
        description="How the attempt ended. Failed, preempted and cancelled attempts are "
        "paid for too: they count in spend and as badput ('failed attempts'). 'running' "
        "reports an attempt at its start (no finished_at, gpu_hours or utilization yet); "
        "post the same run_id again with finished_at and the final outcome to complete it.",
    )
    retraining_id: Annotated[Identifier, Field(min_length=1, max_length=200)] | None = Field(
        None,
        description="The scheduled retraining this attempt belongs to (default: the run_id). "
        "Give a retry the id of the attempt it retries: a retraining costs all its attempts.",
    )
    gpu_utilization: float | None = Field(
        None,
        description="Average busy fraction, 0..1 (0.38, not 38). Omit it when unknown (a "
        "crash before it was measured): the attempt counts in spend and badput, never in "
        "utilization averages.",
    )
    utilization_source: UtilizationSource | None = Field(
        None, description="Where gpu_utilization came from (which metric measured it)."
    )
    gpu_hours: float | None = Field(
        None, ge=TINY, le=1e9, description="Billed GPU-hours; default workers x wall clock."
    )
    # Bounds inside Annotated: on the Optional they became non-standard "ge"/"le" keys
    # in OpenAPI, which generated clients ignore.
    price_per_gpu_hour: (
        Annotated[float, Field(ge=0, le=10_000), AfterValidator(snap_tiny)] | None
    ) = None
    quality_metric: Annotated[Identifier, Field(max_length=100)] | None = None
    quality_value: float | None = Field(None, ge=-1e12, le=1e12)
    data_stall_hours: NonNegative = 0.0
    checkpoint_hours: NonNegative = 0.0
    scheduling_wait_hours: NonNegative = 0.0
    mfu: Fraction | None = None
    interruptions: list[InterruptionIn] = Field(default_factory=list, max_length=1000)
    tags: dict[TagKey, TagValue] = Field(default_factory=dict, max_length=MAX_TAGS)

    @field_validator("gpu_utilization")
    @classmethod
    def _fraction(cls, value: float | None) -> float | None:
        if value is None:
            return None
        if 1 < value <= 100:
            raise ValueError(
                f"must be a fraction between 0 and 1; {value:g} looks like a percentage: "
                f"did you mean {value / 100:g}?"
            )
        if not 0 <= value <= 1:
            raise ValueError("must be a fraction between 0 and 1")
        return snap_tiny(value)


class RunBatchIn(StrictModel):
    runs: list[RunIn] = Field(min_length=1)


class InterruptionOut(OutModel):
    lost_progress_hours: float
    resume_hours: float
    reschedule_hours: float
    cause: str | None


class RunOut(OutModel):
    id: int
    pipeline: str
    run_id: str
    variant: str
    started_at: datetime
    finished_at: datetime | None = Field(description="None while the attempt is running.")
    workers: int
    gpu_type: str
    outcome: str
    retraining_id: str
    gpu_utilization: float | None
    utilization_source: str | None
    gpu_hours: float
    price_per_gpu_hour: float | None
    quality_metric: str | None
    quality_value: float | None
    data_stall_hours: float
    checkpoint_hours: float
    scheduling_wait_hours: float
    mfu: float | None
    interruptions: list[InterruptionOut]
    tags: dict[str, str]
    created_at: datetime
    # Derived
    wall_clock_hours: float | None = Field(description="None while the attempt is running.")
    effective_price_per_gpu_hour: float
    cost_usd: float
    idle_gpu_hours: float | None


class RunPage(OutModel):
    runs: list[RunOut]
    next_cursor: str | None = Field(description="Pass as `cursor` to get the next page.")


class BatchItem(OutModel):
    index: int
    id: int
    run_id: str
    pipeline: str
    status: str = Field(
        description="`created`, `existing` for an identical retry, or `completed` for a "
        "running attempt this post finished."
    )


class BatchOut(OutModel):
    created: int
    existing: int
    completed: int = Field(0, description="Running attempts this batch completed.")
    runs: list[BatchItem]
