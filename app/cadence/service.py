"""The cost-optimal cadence of a recorded pipeline: evaluations, value and the scenario's
cost per run in, the pure arithmetic of app/planning/cadence_value.py out."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm import Session

from app.analytics import service as analytics
from app.cadence.schemas import CadenceOut
from app.evaluations.service import quality_points
from app.exceptions import Invalid
from app.pipelines.service import get_by_name
from app.planning.cadence_value import cadence_value
from app.planning.decay import MIN_POINTS, DecayFit, fit_decay
from app.planning.model import PlanningError
from app.planning.projection import CALENDAR
from app.planning.scenario import Scenario as PlanningScenario
from app.planning.whatif import WhatIf


def _bad(field: str, reason: str) -> Invalid:
    return Invalid(f"{field}: {reason}", fields=[{"field": field, "reason": reason}])


@dataclass(frozen=True)
class Scenario:
    """The planning scenario of the other endpoints (what-ifs, month, budget, variant)."""

    what_if: WhatIf
    convention: str = CALENDAR
    budget: float | None = None
    variant: str | None = None
    proposed_runs_per_week: float | None = None


def decay_fit(session: Session, name: str) -> DecayFit:
    pipeline = get_by_name(session, name)
    points = quality_points(session, pipeline)
    if len(points) < MIN_POINTS:
        raise _bad(
            "evaluations",
            f"pipeline {name!r} has {len(points)} evaluations of {pipeline.quality_metric!r}; "
            f"the decay fit needs at least {MIN_POINTS} at two or more model ages "
            f"(POST /api/v1/pipelines/{name}/evaluations)",
        )
    try:
        return fit_decay(points, higher_is_better=pipeline.higher_is_better)
    except PlanningError as exc:
        raise _bad("evaluations", str(exc)) from exc


def cadence(session: Session, name: str, scenario: Scenario) -> CadenceOut:
    pipeline = get_by_name(session, name)
    value = pipeline.quality_value_usd_per_unit_month
    if value is None:
        raise _bad(
            "quality_value_usd_per_unit_month",
            f"not set for pipeline {name!r}: PUT /api/v1/pipelines/{name} with what one unit "
            f"of {pipeline.quality_metric} is worth per month",
        )
    fit = decay_fit(session, name)
    w = scenario.what_if
    planning = PlanningScenario(
        price=w.price,
        utilization_target=w.utilization_target,
        workers=w.workers,
        failure_rate=w.failure_rate_per_instance_hour,
        checkpoint_interval_hours=w.checkpoint_interval_hours,
        convention=scenario.convention,
        budget=scenario.budget,
    )
    out = analytics.projection(
        session,
        name,
        variants=[scenario.variant] if scenario.variant else None,
        cadences=[1.0],
        scenario=planning,
        with_month=False,
    )
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
