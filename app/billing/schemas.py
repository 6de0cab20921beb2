"""What the reconciliation endpoints answer."""

from __future__ import annotations

from pydantic import Field

from app.schemas_common import OutModel


class FiguresOut(OutModel):
    billed_usd: float = Field(description="EffectiveCost of the GPU lines, within the month")
    explained_usd: float = Field(description="the part the recorded runs held the resources")
    unexplained_usd: float = Field(description="billed minus explained: GPUs paid while idle")
    billed_gpu_hours: float
    explained_gpu_hours: float
    effective_price_per_gpu_hour: float | None = Field(
        description="billed_usd / billed_gpu_hours: the bill's price, discounts included"
    )
    explained_share: float | None = Field(description="explained_usd / billed_usd")
    lines: int = Field(description="bill lines counted (a line shared by pipelines in each)")


class ReconciliationOut(FiguresOut):
    pipeline: str
    month: str = Field(description="YYYY-MM, UTC")
    recorded_price_per_gpu_hour: float = Field(
        description="the pipeline's price setting, to hold against the bill's"
    )
    warnings: list[str] = Field(
        default_factory=list,
        description="e.g. the bill explains more GPU-hours than the pipeline's runs recorded",
    )


class PipelineFiguresOut(FiguresOut):
    pipeline: str


class OrgReconciliationOut(OutModel):
    month: str
    total: FiguresOut
    unattributed: FiguresOut = Field(
        description="GPU lines no run named and no cadence_pipeline tag claims (untagged)"
    )
    pipelines: list[PipelineFiguresOut]
    warnings: list[str] = Field(
        default_factory=list,
        description="one per pipeline whose explained GPU-hours exceed its runs' own",
    )
