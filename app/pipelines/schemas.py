"""Pipelines: their price, budget, cadence and quality metric."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, field_validator

from app.schemas_common import Identifier, OutModel, StrictModel, snap_tiny

MAX_DESCRIBED_VARIANTS = 20
VariantName = Annotated[Identifier, Field(min_length=1, max_length=64)]
Description = Annotated[Identifier, Field(min_length=1, max_length=200)]


class PipelineUpdate(StrictModel):
    """Fields to change; omitted fields keep their value (or defaults, on creation)."""

    display_name: Annotated[Identifier, Field(min_length=1, max_length=200)] | None = None
    owner: Annotated[Identifier, Field(max_length=200)] | None = None
    price_per_gpu_hour: Annotated[float, AfterValidator(snap_tiny)] | None = Field(
        None, ge=0, le=10_000, description="USD"
    )
    monthly_budget_usd: float | None = Field(None, ge=0, le=1e12, description="USD per month")
    runs_per_week: float | None = Field(None, gt=0, le=1000, description="Current cadence")
    quality_metric: Annotated[Identifier, Field(min_length=1, max_length=100)] | None = None
    higher_is_better: bool | None = None
    production_variant: Annotated[Identifier, Field(min_length=1, max_length=64)] | None = Field(
        None, description="Variant in production: the overview's monthly cost comes from it"
    )
    gate_cost_basis: Literal["median", "p90"] | None = Field(
        None, description="Projected figure the gate's cost criterion compares with the budget"
    )
    gate_power: float | None = Field(
        None, ge=0.5, le=0.99, description="Power 'runs still needed' is computed for"
    )
    quality_value_usd_per_unit_month: float | None = Field(
        None, ge=0, le=1e12, description="USD per month one unit of the quality metric is worth"
    )
    variant_descriptions: dict[VariantName, Description] | None = Field(
        None,
        max_length=MAX_DESCRIBED_VARIANTS,
        description='What each variant is, e.g. {"candidate": "sharded input + async '
        'checkpoints"}; replaces the previous descriptions ({} clears them)',
    )
    quality_margin: float | None = Field(
        None,
        ge=0,
        le=1e6,
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
