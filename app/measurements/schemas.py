"""A stored run's measurements as a later reader sends them (``cadence enrich``)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import Field, field_validator

from app.runs.schemas import RunIn, UtilizationSource
from app.schemas_common import (
    Fraction,
    Identifier,
    NonNegative,
    OutModel,
    StrictModel,
    Text,
)

# The fields this endpoint may change: what was measured about the run, never what
# identifies, bills or schedules it.
MEASUREMENT_FIELDS = (
    "gpu_utilization",
    "utilization_source",
    "mfu",
    "data_stall_hours",
    "checkpoint_hours",
)
# What describes a utilization sent with them: recorded in the audit beside the change
# (``cadence enrich prometheus`` sends both), never columns of the run.
READING_FIELDS = ("utilization_coverage", "utilization_note")
MAX_BATCH = 1000


class MeasurementsIn(StrictModel):
    """Only the fields sent are changed; ``null`` clears ``utilization_source`` or ``mfu``."""

    gpu_utilization: float | None = Field(
        None, description="Average busy fraction, 0..1 (0.38, not 38)."
    )
    utilization_source: UtilizationSource | None = None
    mfu: Fraction | None = None
    data_stall_hours: NonNegative | None = None
    checkpoint_hours: NonNegative | None = None
    utilization_coverage: Fraction | None = Field(
        None,
        description="The share of the run's wall clock the utilization's series cover "
        "(0.5: half); recorded with a change of gpu_utilization or utilization_source.",
    )
    utilization_note: Annotated[Text, Field(max_length=500)] | None = Field(
        None, description="How the utilization was chosen (a silent zero, low coverage)."
    )

    @field_validator("gpu_utilization")
    @classmethod
    def _fraction(cls, value: float | None) -> float | None:
        # The run record's own check: a percentage is named as one ("did you mean 0.38?").
        return RunIn._fraction(value)


class RunMeasurementsIn(MeasurementsIn):
    run_id: Annotated[Identifier, Field(min_length=1, max_length=200)]


class MeasurementBatchIn(StrictModel):
    runs: list[RunMeasurementsIn] = Field(min_length=1, max_length=MAX_BATCH)


class MeasuredRun(OutModel):
    id: int
    run_id: str
    changed: list[str] = Field(description="The fields whose stored value changed.")


class MeasurementsOut(OutModel):
    updated: int = Field(description="Runs with at least one changed field.")
    unchanged: int
    runs: list[MeasuredRun]


class MeasurementChangeOut(OutModel):
    field: str = Field(description="the measurement changed, e.g. gpu_utilization")
    old_value: str | None = Field(description="as it was, as shown to people")
    new_value: str | None
    changed_by: str = Field(description="the token's name (or api/cli)")
    changed_at: datetime


class MeasurementChangesOut(OutModel):
    pipeline: str
    run_id: str
    changes: list[MeasurementChangeOut] = Field(description="oldest first")
