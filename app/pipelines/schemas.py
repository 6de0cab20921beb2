"""Pipelines: their price, budget, cadence and quality metric."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import AfterValidator, Field, field_validator

from app.schemas_common import CostBasisIn, Identifier, OutModel, StrictModel, Timestamp

MAX_DESCRIBED_VARIANTS = 20
VariantName = Annotated[Identifier, Field(min_length=1, max_length=64)]
Description = Annotated[Identifier, Field(min_length=1, max_length=200)]


# The bounds of every setting (docs/security.md, "Bounds of the pipeline settings"). Zero
# and denormal values (5e-324) passed before and broke every figure that divides by them
# (a cost per run of 0, "inf weeks"); the upper bounds are far beyond any real pipeline.
MIN_PRICE = 0.001  # USD per GPU-hour: a tenth of a cent, below any cloud or on-prem rate
MAX_PRICE = 10_000.0
MIN_RUNS_PER_WEEK = 0.01  # one run in 100 weeks
MAX_RUNS_PER_WEEK = 1000.0  # six an hour
MIN_BUDGET = 1.0  # USD per month; no budget is null, not 0
MAX_USD = 1e12
MIN_VALUE = 0.01  # USD per unit-month; unknown is null, not 0
MIN_MARGIN = 1e-9  # a margin is 0 (strict) or at least this; below is a rounding error
MAX_MARGIN = 1e6


def zero_or_at_least(minimum: float) -> AfterValidator:
    def check(value: float) -> float:
        if 0 < value < minimum:
            raise ValueError(f"must be 0 or at least {minimum:g}")
        return value

    return AfterValidator(check)


Price = Annotated[float, Field(ge=MIN_PRICE, le=MAX_PRICE)]
RunsPerWeek = Annotated[float, Field(ge=MIN_RUNS_PER_WEEK, le=MAX_RUNS_PER_WEEK)]
Budget = Annotated[float, Field(ge=MIN_BUDGET, le=MAX_USD, description="USD per month")]
Margin = Annotated[float, Field(ge=0, le=MAX_MARGIN), zero_or_at_least(MIN_MARGIN)]


class PipelineUpdate(StrictModel):
    """Fields to change; omitted fields keep their value (or defaults, on creation)."""

    display_name: Annotated[Identifier, Field(min_length=1, max_length=200)] | None = None
    owner: Annotated[Identifier, Field(max_length=200)] | None = None
    price_per_gpu_hour: Price | None = Field(None, description="USD per GPU-hour")
    monthly_budget_usd: Budget | None = Field(None, description="USD per month (null: no budget)")
    runs_per_week: RunsPerWeek | None = Field(None, description="Current cadence")
    quality_metric: Annotated[Identifier, Field(min_length=1, max_length=100)] | None = None
    higher_is_better: bool | None = None
    production_variant: Annotated[Identifier, Field(min_length=1, max_length=64)] | None = Field(
        None, description="Variant in production: the overview's expected bill comes from it"
    )
    gate_cost_basis: CostBasisIn | None = Field(
        None,
        description="The bill's figure the gate's cost criterion shows beside its chance "
        "over: expected_bill or p90 ('median', its old name, is refused). It decides no "
        "verdict: every budget word is P(bill > budget) against CADENCE_RISK_TOLERANCE",
    )
    gate_power: Annotated[float, Field(ge=0.5, le=0.99)] | None = Field(
        None, description="Power 'runs still needed' is computed for"
    )
    quality_value_usd_per_unit_month: Annotated[float, Field(ge=MIN_VALUE, le=MAX_USD)] | None = (
        Field(
            None,
            description="USD per month one unit of the quality metric is worth (null: unknown)",
        )
    )
    variant_descriptions: dict[VariantName, Description] | None = Field(
        None,
        max_length=MAX_DESCRIBED_VARIANTS,
        description='What each variant is, e.g. {"candidate": "sharded input + async '
        'checkpoints"}; replaces the previous descriptions ({} clears them)',
    )
    quality_margin: Margin | None = Field(
        None,
        description="The gate's non-inferiority margin in the quality metric's units: how "
        "much worse the candidate's quality may be (default 0.01)",
    )


class PipelineOut(OutModel):
    name: str
    display_name: str
    owner: str
    price_per_gpu_hour: float
    monthly_budget_usd: float | None
    runs_per_week: float
    quality_metric: str
    higher_is_better: bool
    production_variant: str = "baseline"
    gate_cost_basis: str = "p90"
    gate_power: float = 0.8
    quality_value_usd_per_unit_month: float | None = None
    variant_descriptions: dict[str, str] = Field(default_factory=dict)
    quality_margin: float = 0.01
    created_at: datetime
    run_count: int = 0
    last_run_at: datetime | None = None

    @field_validator("variant_descriptions", mode="before")
    @classmethod
    def _none_is_empty(cls, value: object) -> object:
        return {} if value is None else value  # rows older than the setting


class PipelineList(OutModel):
    pipelines: list[PipelineOut]
    total: int = Field(description="Pipelines visible to the caller, on every page.")
    next_cursor: str | None = Field(
        description="Pass as ?cursor= for the next page; null on the last page."
    )


NoteText = Annotated[Identifier, Field(min_length=1, max_length=500)]


class ChangeNoteIn(StrictModel):
    """A change of the pipeline's costs, declared: when it took effect and what it was."""

    at: Timestamp = Field(description="When the change took effect (ISO 8601 with an offset)")
    description: NoteText = Field(
        description='What changed, e.g. "async checkpoints in production"'
    )


class ChangePointOut(OutModel):
    """A change point of the cost series: a declared note (``kind`` "declared", with its
    ``id``) or a change of the pipeline's price setting (``kind`` "price")."""

    id: int | None = Field(description="The note's id (declared notes only)")
    kind: str = Field(description='"declared" or "price"')
    at: datetime
    description: str
    by: str = Field(description="Who declared or changed it (token name, or cli)")


class ChangePointList(OutModel):
    changes: list[ChangePointOut] = Field(description="Oldest first")
