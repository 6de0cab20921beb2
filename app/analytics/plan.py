"""POST /api/v1/plan: projection, checkpoint and gate arithmetic from numbers given by hand."""

from __future__ import annotations

from app.analytics.schemas import ArmRunIn, CheckpointIn, GateIn, PlanIn, PlanOut
from app.planning.cadence_value import CadenceValue, cadence_value
from app.planning.decay import Decay, DecayFit, QualityPoint, fit_decay
from app.planning.failures import CheckpointAdvice, checkpoint_advice
from app.planning.gate import GateResult, GateThresholds, evaluate_gate
from app.planning.model import RunFacts
from app.planning.projection import Projection, project_from_inputs, runs_per_month
from app.planning.scaling import ScalingModel, ScalingPoint, fit_usl
from app.planning.whatif import WhatIf, like_plan_run


def what_if_of(plan: PlanIn) -> WhatIf | None:
    w = plan.what_if
    if w is None:
        return None
    return WhatIf(
        price=w.price_per_gpu_hour,
        utilization_target=w.utilization_target,
        workers=w.workers,
        failure_rate_per_instance_hour=w.failure_rate,
        checkpoint_interval_hours=w.checkpoint_interval_hours
        or (plan.checkpoints.checkpoint_interval_hours if plan.checkpoints else None),
        resume_hours=plan.checkpoints.restart_hours if plan.checkpoints else 0.0,
    )


def _plan_run(plan: PlanIn) -> RunFacts:
    full = plan.workers * plan.wall_clock_hours
    gpu_hours = plan.gpu_hours if plan.gpu_hours is not None else full
    return RunFacts(
        workers=plan.workers,
        wall_clock_hours=plan.wall_clock_hours,
        gpu_hours=gpu_hours,
        gpu_utilization=plan.gpu_utilization,
        price_per_gpu_hour=plan.price_per_gpu_hour,
    )


def _arm(runs: list[ArmRunIn], plan: PlanIn, model: ScalingModel | None) -> list[RunFacts]:
    """Arm runs as RunFacts. A run without a wall clock is the plan's run at the arm's
    utilization and workers (:func:`app.planning.whatif.like_plan_run`), priced like the
    plan; a run that gives its wall clock is W x T. Price: the run's, else the plan's."""
    base = _plan_run(plan)
    out = []
    for r in runs:
        wall, gpu_hours = like_plan_run(
            base,
            gpu_utilization=r.gpu_utilization,
            workers=r.workers,
            wall_clock_hours=r.wall_clock_hours,
            scaling_model=model,
        )
        price = r.price_per_gpu_hour
        out.append(
            RunFacts(
                workers=r.workers if r.workers is not None else plan.workers,
                wall_clock_hours=wall,
                gpu_hours=gpu_hours,
                gpu_utilization=r.gpu_utilization,
                price_per_gpu_hour=price if price is not None else plan.price_per_gpu_hour,
                quality_value=r.quality_value,
            )
        )
    return out


def plan(body: PlanIn) -> PlanOut:
    model = fit_usl([ScalingPoint(p.workers, p.wall_clock_hours) for p in body.scaling_probes])
    what_if = what_if_of(body)
    projection = project_from_inputs(
        workers=body.workers,
        wall_clock_hours=body.wall_clock_hours,
        utilization=body.gpu_utilization,
        price_per_gpu_hour=body.price_per_gpu_hour,
        cadences=body.cadences,
        gpu_hours=body.gpu_hours,
        convention=body.weeks_per_month,
        budget_usd=body.budget_usd,
        current_runs_per_week=body.current_runs_per_week,
        what_if=what_if,
        scaling_model=model,
        data_stall_hours=body.data_stall_hours,
        checkpoint_hours=body.checkpoint_hours,
    )
    price = what_if.price if what_if is not None and what_if.price is not None else None
    advice = _checkpoints(body, body.checkpoints, price) if body.checkpoints is not None else None
    gate = _gate(body, body.gate, what_if, model) if body.gate is not None else None
    decay, value = _value(body, projection)
    return PlanOut(
        projection=projection,
        scaling_model=model,
        checkpoints=advice,
        gate=gate,
        decay=decay,
        cadence=value,
    )


def _checkpoints(body: PlanIn, c: CheckpointIn, price: float | None) -> CheckpointAdvice:
    """Checkpoint advice for the plan's run at today's cadence (the what-if price if any)."""
    paid = (body.gpu_hours or body.workers * body.wall_clock_hours) / body.wall_clock_hours
    return checkpoint_advice(
        write_hours=c.checkpoint_write_hours,
        current_interval_hours=c.checkpoint_interval_hours,
        workers=paid,
        instances=c.instances,
        wall_clock_hours=body.wall_clock_hours,
        runs_per_month=runs_per_month(body.current_runs_per_week, body.weeks_per_month),
        price_per_gpu_hour=price if price is not None else body.price_per_gpu_hour,
        failure_rate_per_instance_hour=c.failure_rate,
        resume_hours=c.restart_hours,
    )


def _gate(
    body: PlanIn, g: GateIn, what_if: WhatIf | None, model: ScalingModel | None
) -> GateResult:
    """The gate on the plan's two arms, each run priced like the plan (``_arm``)."""
    return evaluate_gate(
        _arm(g.baseline, body, model),
        _arm(g.candidate, body, model),
        higher_is_better=g.higher_is_better,
        target_runs_per_week=g.target_runs_per_week,
        budget_usd=g.budget_usd,
        convention=body.weeks_per_month,
        thresholds=GateThresholds(
            min_utilization_uplift_points=g.min_utilization_uplift_points,
            quality_margin=g.quality_margin,
            alpha=g.alpha,
            min_runs=g.min_runs,
            power=g.power,
            cost_basis=g.cost_basis,
        ),
        what_if=what_if,
        scaling_model=model,
        current_runs_per_week=body.current_runs_per_week,
    )


def _value(body: PlanIn, projection: Projection) -> tuple[DecayFit | None, CadenceValue | None]:
    """The cost-optimal cadence from a given decay (a rate, or points to fit) and value;
    the cost per run is the projection's (what-ifs applied)."""
    if body.value is None:
        return None, None
    v = body.value
    fit = None
    if v.points is not None:
        points = [QualityPoint(p.age_weeks, p.value) for p in v.points]
        fit = fit_decay(points, higher_is_better=v.higher_is_better)
        decay = fit.decay
    else:
        decay = Decay("linear", v.rate_per_week or 0.0)
    at = projection.cadences[0]
    return fit, cadence_value(
        decay,
        value_usd_per_unit_month=v.quality_value_usd_per_unit_month,
        cost_per_run_usd=at.cost_per_run_usd,
        weeks_per_month=projection.weeks_per_month,
        wall_clock_hours=at.wall_clock_hours_per_run,
        budget_usd=body.budget_usd,
        today_runs_per_week=body.current_runs_per_week,
        max_reliable_age_weeks=fit.max_reliable_age_weeks if fit else None,
    )
