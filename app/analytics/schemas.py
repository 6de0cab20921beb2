"""Responses of the planning endpoints: thin wrappers around the planning dataclasses."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, Field, model_validator

from app.planning.cadence_value import CadenceValue
from app.planning.decay import DecayFit
from app.planning.failures import CheckpointAdvice, FailureRateEstimate
from app.planning.gate import CriterionResult, GateResult
from app.planning.goodput import Goodput
from app.planning.levers import Lever
from app.planning.month_to_date import MonthToDate
from app.planning.projection import CALENDAR, MonthConvention, Projection
from app.planning.scaling import ScalingModel, ScalingRow
from app.planning.scenario import RunWindow
from app.planning.weekly import WeekSummary
from app.planning.welch import ALPHA_MIN
from app.schemas_common import CostBasisIn, StrictModel


class ScenarioOut(BaseModel):
    """The scenario a response used: the query's values and what they resolved to."""

    cadence: float | None
    price: float | None
    utilization_target: float | None
    workers: int | None
    failure_rate: float | None
    checkpoint_interval_hours: float | None
    convention: str
    budget: float | None
    target_runs_per_week: float = Field(description="Cadence every figure is computed at.")
    current_runs_per_week: float
    budget_usd: float | None = Field(description="The budget used (scenario's, else pipeline's).")
    price_used: str = Field(description="Which price every dollar figure uses.")
    cost_basis: Literal["expected_bill", "p90"] = Field(
        "p90",
        description="The bill's figure a budget sentence shows beside its chance (the "
        "pipeline's gate_cost_basis, or the gate's cost_basis): expected_bill_usd or "
        "bill_p90_usd. It decides nothing: every verdict is the risk_tolerance test.",
    )
    risk_tolerance: float = Field(
        0.1,
        description="CADENCE_RISK_TOLERANCE: a plan fits its budget while P(bill > budget) "
        "is below it (the one test of every budget word: the decision card, the gate, "
        "`cadence check`, the portfolio, the review and the alerts).",
    )


class ProjectionOut(BaseModel):
    pipeline: str
    variants: list[str] = Field(description="Variants projected, in order.")
    current_variant: str | None = Field(description="Variant whose runs define today's cost.")
    projections: dict[str, Projection]
    available_variants: list[str]
    scenario: ScenarioOut
    windows: dict[str, RunWindow] = Field(description="Runs each variant's figures come from.")
    month_to_date: MonthToDate | None = Field(
        None,
        description="This month so far (every variant, experiments apart) and the "
        "end-of-month bill; status: over (spent more already), likely_over (P >= "
        "CADENCE_STATUS_LIKELY_OVER, 50% by default), at_risk (P >= CADENCE_RISK_TOLERANCE, "
        "10%) or within, null without a budget.",
    )


class GoodputOut(BaseModel):
    pipeline: str
    group: Literal["week"] = "week"
    weeks: list[WeekSummary]
    total: Goodput
    warnings: list[str] = Field(
        default_factory=list, description="E.g. weeks whose runs mix utilization sources."
    )


@dataclass(frozen=True)
class CriterionOut(CriterionResult):
    """A gate criterion with its plain words (app/planning/gate_words.py)."""

    label: str = ""
    """The name people use, e.g. "The bill at the target cadence"."""
    plain: str = ""
    """The result in words against its threshold, with the runs still needed in weeks and
    dollars, or why more runs cannot make it pass."""
    status_label: str = ""
    """pass, fail, not yet or cannot pass."""


@dataclass(frozen=True)
class GateResultOut(GateResult):
    criteria: tuple[CriterionOut, ...]


class GateOut(BaseModel):
    pipeline: str
    baseline: str
    candidate: str
    target_runs_per_week: float
    budget_usd: float
    quality_metric: str
    higher_is_better: bool
    verdict_label: str = Field(description="PASS, FAIL or NOT YET (INSUFFICIENT_DATA).")
    headline: str = Field(
        description="The verdict and its reason in one sentence, as the pipeline page shows it."
    )
    result: GateResultOut
    scenario: ScenarioOut
    windows: dict[str, RunWindow]
    warnings: list[str] = Field(
        default_factory=list, description="E.g. arms whose runs mix utilization sources."
    )


class Prediction(BaseModel):
    workers: int
    wall_clock_hours: float
    gpu_hours: float
    extrapolation: bool


class ScalingOut(BaseModel):
    pipeline: str
    variant: str | None
    table: list[ScalingRow]
    model: ScalingModel | None
    advice: list[str]
    prediction: Prediction | None
    utilization: float | None


class LeversOut(BaseModel):
    pipeline: str
    variant: str
    runs_per_week: float
    runs_per_month: float
    levers: list[Lever]
    scenario: ScenarioOut
    window: RunWindow


class InputSource(BaseModel):
    value: float
    source: Literal["query", "recorded", "default"]
    note: str = ""


class CheckpointsOut(BaseModel):
    pipeline: str
    inputs: dict[str, InputSource]
    failure_rate_estimate: FailureRateEstimate | None
    advice: CheckpointAdvice
    scenario: ScenarioOut
    window: RunWindow


# POST /api/v1/plan -----------------------------------------------------------------

# Ranges a real plan has; outside them the arithmetic overflows or divides by ~0
# (property-based fuzzing found both).
Hours = Annotated[float, Field(ge=1e-4, le=1e5, description="hours")]
Price = Annotated[float, Field(ge=0, le=10_000, description="USD per GPU-hour")]
Budget = Annotated[float, Field(ge=0, le=1e12, description="USD per month")]
Duration = Annotated[float, Field(ge=0, le=1e5, description="hours")]
Metric = Annotated[float, Field(ge=-1e12, le=1e12)]
RunsPerWeek = Annotated[float, Field(ge=0.01, le=100)]
FailureRate = Annotated[float, Field(ge=1e-9, le=0.1, description="per instance-hour")]


class WhatIfIn(StrictModel):
    price_per_gpu_hour: Price | None = None
    utilization_target: Annotated[float, Field(ge=0.01, le=1)] | None = None
    workers: Annotated[int, Field(ge=1, le=100_000)] | None = None
    failure_rate: Annotated[float, Field(ge=0, le=0.1)] | None = None
    checkpoint_interval_hours: Hours | None = None


class ProbeIn(StrictModel):
    workers: Annotated[int, Field(ge=1, le=100_000)]
    wall_clock_hours: Hours


class ArmRunIn(StrictModel):
    """One run of a gate arm. Omitted workers, wall clock and price come from the plan."""

    workers: Annotated[int, Field(ge=1, le=100_000)] | None = None
    wall_clock_hours: Hours | None = None
    gpu_utilization: Annotated[float, Field(ge=0, le=1)]
    quality_value: Metric | None = None
    price_per_gpu_hour: Price | None = None


class GateIn(StrictModel):
    baseline: list[ArmRunIn] = Field(max_length=1000)
    candidate: list[ArmRunIn] = Field(max_length=1000)
    higher_is_better: bool = True
    target_runs_per_week: RunsPerWeek = 2.0
    budget_usd: Budget
    min_utilization_uplift_points: Annotated[float, Field(ge=0, le=100)] = 10.0
    quality_margin: Annotated[float, Field(ge=0, le=1e6)] = 0.01
    alpha: Annotated[float, Field(ge=ALPHA_MIN, lt=0.5)] = 0.05
    min_runs: Annotated[int, Field(ge=2, le=1000)] = 3
    power: Annotated[float, Field(ge=0.5, le=0.99)] = 0.8
    cost_basis: CostBasisIn = "p90"


class CheckpointIn(StrictModel):
    instances: Annotated[int, Field(ge=1, le=1_000_000)] | None = None
    failure_rate: FailureRate = 4e-4
    checkpoint_write_hours: Hours
    checkpoint_interval_hours: Hours
    restart_hours: Duration = 0.0


class DecayPointIn(StrictModel):
    age_weeks: Annotated[float, Field(ge=0, le=520, description="weeks since the run finished")]
    value: Metric


class ValueIn(StrictModel):
    """The value side of cadence (methodology.md §11): what quality is worth and how fast it
    decays, as a linear rate or as evaluated (age, value) points to fit."""

    quality_value_usd_per_unit_month: Budget
    rate_per_week: Annotated[float, Field(ge=-1e6, le=1e6)] | None = Field(
        None, description="Linear decay b: quality lost per week"
    )
    points: list[DecayPointIn] | None = Field(None, min_length=3, max_length=5000)
    higher_is_better: bool = True

    @model_validator(mode="after")
    def _one_decay(self) -> ValueIn:
        if (self.rate_per_week is None) == (self.points is None):
            raise ValueError("give the decay as rate_per_week or as points, not both or neither")
        return self


class PlanIn(StrictModel):
    """A plan from numbers you already know, for pipelines with no recorded runs."""

    workers: Annotated[int, Field(ge=1, le=100_000)]
    wall_clock_hours: Hours
    gpu_utilization: Annotated[float, Field(ge=0, le=1)]
    price_per_gpu_hour: Price
    gpu_hours: Annotated[float, Field(ge=1e-4, le=1e9)] | None = None
    data_stall_hours: Duration = 0.0
    checkpoint_hours: Duration = 0.0
    cadences: list[RunsPerWeek] = Field(
        default_factory=lambda: [1.0, 2.0], min_length=1, max_length=20
    )
    current_runs_per_week: RunsPerWeek = 1.0
    budget_usd: Budget | None = None
    weeks_per_month: MonthConvention = CALENDAR
    what_if: WhatIfIn | None = None
    scaling_probes: list[ProbeIn] = Field(default_factory=list, max_length=100)
    checkpoints: CheckpointIn | None = None
    gate: GateIn | None = None
    value: ValueIn | None = None


class PlanOut(BaseModel):
    projection: Projection
    scaling_model: ScalingModel | None
    checkpoints: CheckpointAdvice | None
    gate: GateResult | None
    decay: DecayFit | None = None
    cadence: CadenceValue | None = Field(
        None, description="The cost-optimal cadence at the first cadence's cost per run."
    )


class RecordMonthOut(BaseModel):
    """One closed month: the forecast made at its start and what the month cost."""

    month: str = Field(description="The calendar month, YYYY-MM (UTC)")
    source: Literal["recorded", "backtest"] = Field(
        description="recorded: kept when it was made; backtest: made now from the runs "
        "that had started before the month, with today's budget and cadence"
    )
    forecast_at: datetime
    expected_bill_usd: float
    bill_p10_usd: float
    bill_p90_usd: float
    p_over_budget: float | None = Field(description="P(bill > budget) as forecast")
    budget_usd: float | None = Field(description="The budget the forecast was judged on")
    status: str | None = Field(description="The status word it showed")
    actual_usd: float = Field(description="The month's spend: every attempt of every variant")
    p90_exceeded: bool
    inside_band: bool = Field(description="p10 <= actual <= p90")
    error_pct: float | None = Field(description="(expected - actual) / actual x 100")
    budget_exceeded: bool | None
    status_right: bool | None = Field(
        description="over/likely_over for a month that went over its budget, "
        "within/at_risk for one that did not"
    )


class RecordSummaryOut(BaseModel):
    months: int
    p90_exceeded: int
    inside_band: int
    mean_abs_error_pct: float | None
    budgeted_months: int
    status_right: int
    sentence: str


class ForecastRecordOut(BaseModel):
    pipeline: str
    months_asked: int
    order: Literal["newest_first"] = "newest_first"
    months: list[RecordMonthOut]
    summary: RecordSummaryOut
    notes: list[str]
