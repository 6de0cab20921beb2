"""The cost-optimal cadence of a recorded pipeline: evaluations, value and the scenario's
cost per run in, the pure arithmetic of app/planning/cadence_value.py out."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm import Session

from app.analytics import service as analytics
from app.analytics.missing import NotEnoughData
from app.analytics.reads import RunReads, read_runs
from app.cadence.schemas import CadenceOut
from app.db.models import Pipeline
from app.evaluations.service import quality_points
from app.pipelines.service import get_by_name
from app.planning.cadence_value import cadence_value
from app.planning.decay import MIN_POINTS, DecayFit, QualityPoint, fit_decay
from app.planning.model import PlanningError
from app.planning.projection import CALENDAR
from app.planning.scenario import Scenario as PlanningScenario
from app.planning.whatif import WhatIf


@dataclass(frozen=True)
class Scenario:
    """The planning scenario of the other endpoints (what-ifs, month, budget, variant)."""

    what_if: WhatIf
    convention: str = CALENDAR
    budget: float | None = None
    variant: str | None = None
    proposed_runs_per_week: float | None = None


def _planning(scenario: Scenario) -> PlanningScenario:
    """The planning scenario of the projection that prices a retraining."""
    w = scenario.what_if
    return PlanningScenario(
        price=w.price,
        utilization_target=w.utilization_target,
        workers=w.workers,
        failure_rate=w.failure_rate_per_instance_hour,
        checkpoint_interval_hours=w.checkpoint_interval_hours,
        convention=scenario.convention,
        budget=scenario.budget,
    )


def decay_fit(pipeline: Pipeline, points: list[QualityPoint]) -> DecayFit | NotEnoughData:
    """The decay of the serving model's quality with its age, from its evaluations."""
    name = pipeline.name
    if len(points) < MIN_POINTS:
        return NotEnoughData(
            "evaluations",
            f"pipeline {name!r} has {len(points)} evaluations of {pipeline.quality_metric!r}; "
            f"the decay fit needs at least {MIN_POINTS} at two or more model ages "
            f"(POST /api/v1/pipelines/{name}/evaluations)",
        )
    try:
        return fit_decay(points, higher_is_better=pipeline.higher_is_better)
    except PlanningError as exc:
        return NotEnoughData("evaluations", str(exc))


def cadence_of(session: Session, name: str, scenario: Scenario) -> CadenceOut | NotEnoughData:
    pipeline = get_by_name(session, name)
    runs = read_runs(session, pipeline, (scenario.variant,))
    return cadence(pipeline, runs, quality_points(session, pipeline), scenario)


def cadence(
    pipeline: Pipeline, runs: RunReads, points: list[QualityPoint], scenario: Scenario
) -> CadenceOut | NotEnoughData:
    """Retraining spend plus the value lost to a stale model, at each cadence, priced
    from the scenario's projection of the variant (default: the production variant)."""
    name = pipeline.name
    value = pipeline.quality_value_usd_per_unit_month
    if value is None:
        return NotEnoughData(
            "quality_value_usd_per_unit_month",
            f"not set for pipeline {name!r}: PUT /api/v1/pipelines/{name} with what one unit "
            f"of {pipeline.quality_metric} is worth per month",
        )
    fit = decay_fit(pipeline, points)
    if isinstance(fit, NotEnoughData):
        return fit
    out = analytics.projection(
        pipeline,
        runs,
        variants=[scenario.variant] if scenario.variant else None,
        cadences=[1.0],
        scenario=_planning(scenario),
    )
    if isinstance(out, NotEnoughData):
        return out
    variant = out.variants[0]
    proj = out.projections[variant]
    at = next(c for c in proj.cadences if c.runs_per_week == 1.0)
    budget = scenario.budget if scenario.budget is not None else pipeline.monthly_budget_usd
    # The mean retraining (failed attempts priced in), what the expected bill multiplies.
    per_run = at.mean_cost_per_run_usd or at.cost_per_run_usd
    result = cadence_value(
        fit.decay,
        value_usd_per_unit_month=value,
        cost_per_run_usd=per_run,
        weeks_per_month=proj.weeks_per_month,
        wall_clock_hours=at.wall_clock_hours_per_run,
        budget_usd=budget,
        today_runs_per_week=pipeline.runs_per_week,
        max_reliable_age_weeks=fit.max_reliable_age_weeks,
        proposed_runs_per_week=scenario.proposed_runs_per_week,
    )
    head = {
        "pipeline": name,
        "variant": variant,
        "quality_metric": pipeline.quality_metric,
        "higher_is_better": pipeline.higher_is_better,
        "value_usd_per_unit_month": value,
        "value_usd_per_hundredth_month": value / 100.0,
        "cost_per_run_usd": per_run,
        "wall_clock_hours": at.wall_clock_hours_per_run,
        "weeks_per_month": proj.weeks_per_month,
        "budget_usd": budget,
    }
    return CadenceOut.build(head, fit, result)
