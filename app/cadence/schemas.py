"""GET /api/v1/pipelines/{name}/cadence: what retraining more often buys."""

from __future__ import annotations

from pydantic import BaseModel, Field

from app.planning.cadence_value import CadenceCost, CadenceValue
from app.planning.decay import DecayFit, Parameter


class DecayOut(BaseModel):
    model: str = Field(description="`linear` or `exponential`.")
    rate_per_week: float = Field(
        description="Quality lost per week (linear b; exponential: the initial slope)."
    )
    rate_interval: tuple[float, float] | None
    tau_weeks: float | None
    tau_interval: tuple[float, float] | None
    confidence: float
    points: int
    age_range_weeks: tuple[float, float]
    max_reliable_age_weeks: float = Field(
        description="Staleness beyond this model age is flagged as extrapolated."
    )
    parameters: list[Parameter]
    aicc: dict[str, float | None] = Field(
        description="AICc of each model fitted; null where it is undefined (a model with "
        "as many parameters as points, e.g. the line through 3 evaluations)."
    )
    residual_sd: float
    notes: list[str]

    @classmethod
    def of(cls, fit: DecayFit) -> DecayOut:
        return cls(
            model=fit.decay.model,
            rate_per_week=fit.decay.rate_per_week,
            rate_interval=fit.rate_interval,
            tau_weeks=fit.decay.tau_weeks,
            tau_interval=fit.tau_interval,
            confidence=fit.confidence,
            points=fit.points,
            age_range_weeks=fit.age_range_weeks,
            max_reliable_age_weeks=fit.max_reliable_age_weeks,
            parameters=list(fit.parameters),
            aicc=fit.aicc,
            residual_sd=fit.residual_sd,
            notes=list(fit.notes),
        )


class Sensitivity(BaseModel):
    half_value_runs_per_week: float
    double_value_runs_per_week: float


class CadenceOut(BaseModel):
    pipeline: str
    variant: str
    quality_metric: str
    higher_is_better: bool
    value_usd_per_unit_month: float
    value_usd_per_hundredth_month: float = Field(description="The same value per 0.01.")
    cost_per_run_usd: float = Field(
        description="The scenario's mean retraining cost (failed attempts included): what "
        "the expected bill multiplies."
    )
    wall_clock_hours: float
    weeks_per_month: float
    budget_usd: float | None
    decay: DecayOut
    curve: list[CadenceCost]
    optimum: CadenceCost
    best_feasible: CadenceCost | None = Field(
        description="Best cadence within the budget (retraining spend) and k <= 168 / T."
    )
    max_runs_per_week: float
    sensitivity: Sensitivity
    today: CadenceCost | None
    weekly: CadenceCost
    saving_vs_weekly_usd: float
    sentence: str
    notes: list[str]
    proposed: CadenceCost | None = Field(
        None, description="The scenario's cadence (?cadence=): retraining, staleness, total"
    )
    proposed_sentence: str | None = Field(
        None, description="What the proposed cadence buys or costs against today's"
    )

    @classmethod
    def build(cls, head: dict[str, object], fit: DecayFit, v: CadenceValue) -> CadenceOut:
        return cls.model_validate(
            {
                **head,
                "decay": DecayOut.of(fit),
                "curve": list(v.curve),
                "optimum": v.optimum,
                "best_feasible": v.best_feasible,
                "max_runs_per_week": v.max_runs_per_week,
                "sensitivity": Sensitivity(
                    half_value_runs_per_week=v.optimum_at_half_value,
                    double_value_runs_per_week=v.optimum_at_double_value,
                ),
                "today": v.today,
                "weekly": v.weekly,
                "saving_vs_weekly_usd": v.saving_vs_weekly_usd,
                "sentence": v.sentence,
                "notes": list(v.notes),
                "proposed": v.proposed,
                "proposed_sentence": v.proposed_sentence,
            }
        )
