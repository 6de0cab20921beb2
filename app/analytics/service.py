"""Planning answers for recorded pipelines: SQL reads in, pure planning functions out."""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from sqlalchemy.orm import Session

from app.analytics import repository as repo
from app.analytics.schemas import (
    CheckpointsOut,
    GateOut,
    InputSource,
    LeversOut,
    Prediction,
    ProjectionOut,
    ScalingOut,
)
from app.db.models import Pipeline
from app.exceptions import CadenceError, Invalid
from app.pipelines.service import get_by_name
from app.planning.failures import (
    DEFAULT_FAILURE_RATE,
    checkpoint_advice,
    estimate_failure_rate,
    write_hours_per_checkpoint,
)
from app.planning.gate import GateThresholds, evaluate_gate
from app.planning.levers import rank_levers
from app.planning.model import PlanningError
from app.planning.projection import CALENDAR, project_costs, runs_per_month
from app.planning.scaling import ScalingModel, ScalingPoint, fit_usl, scaling_advice, scaling_table
from app.planning.whatif import WhatIf

RECENT_RUNS = 12
GATE_RUNS = 30
DEFAULT_CHECKPOINT_INTERVAL_HOURS = 1.0


def _bad(field: str, reason: str) -> Invalid:
    return Invalid(f"{field}: {reason}", fields=[{"field": field, "reason": reason}])


def _variant_names(session: Session, pipeline: Pipeline) -> list[str]:
    return [v.variant for v in repo.variants(session, pipeline.id)]


def default_variants(names: list[str]) -> list[str]:
    """baseline (or the most-run variant), then candidate when there is one."""
    if not names:
        return []
    first = "baseline" if "baseline" in names else names[0]
    rest = ["candidate"] if "candidate" in names and first != "candidate" else []
    return [first, *rest]


def runs_of(
    session: Session, pipeline: Pipeline, variant: str, limit: int, field: str = "variant"
) -> list[repo.RunRow]:
    rows = repo.recent_runs(session, pipeline.id, variant=variant, limit=limit)
    if not rows:
        known = ", ".join(_variant_names(session, pipeline)) or "none yet"
        raise _bad(
            field,
            f"pipeline {pipeline.name!r} has no runs of variant {variant!r} (variants: {known})",
        )
    return rows


@dataclass(frozen=True)
class FailureDefaults:
    interval_hours: float
    restart_hours: float
    rate: float
    rate_source: str


def failure_defaults(session: Session, pipeline: Pipeline) -> FailureDefaults:
    """Checkpoint interval, restart time and failure rate as recorded runs suggest.

    Progress lost at a failure averages half the checkpoint interval, so the interval is
    estimated as 2 x mean lost progress; the failure rate is interruptions per
    instance-hour when at least 3 were recorded, else the planning default 4e-4.
    """
    exposure = repo.failure_exposure(session, pipeline.id)
    interval = DEFAULT_CHECKPOINT_INTERVAL_HOURS
    if exposure.mean_lost_progress_hours:
        interval = 2.0 * exposure.mean_lost_progress_hours
    estimate = estimate_failure_rate(exposure.interruptions, exposure.instance_hours)
    if estimate is not None and estimate.sufficient and estimate.rate > 0:
        rate, source = estimate.rate, "recorded"
    else:
        rate, source = DEFAULT_FAILURE_RATE, "default"
    return FailureDefaults(interval, exposure.mean_restart_hours or 0.0, rate, source)


def scaling_variant(session: Session, pipeline: Pipeline) -> str | None:
    """The variant with the most distinct worker counts (at least two)."""
    stats = [v for v in repo.variants(session, pipeline.id) if v.worker_counts >= 2]
    if not stats:
        return None
    return max(stats, key=lambda v: (v.worker_counts, v.runs)).variant


def scaling_model(
    session: Session, pipeline: Pipeline, variant: str | None = None
) -> tuple[str | None, list[ScalingPoint]]:
    variant = variant or scaling_variant(session, pipeline)
    if variant is None:
        return None, []
    points = [
        ScalingPoint(w, t) for w, t in repo.worker_times(session, pipeline.id, variant) if t > 0
    ]
    return variant, points


def projection(
    session: Session,
    name: str,
    *,
    variants: list[str] | None,
    cadences: list[float],
    what_if: WhatIf,
    convention: str,
    budget: float | None,
    recent: int = RECENT_RUNS,
) -> ProjectionOut:
    pipeline = get_by_name(session, name)
    available = _variant_names(session, pipeline)
    chosen = variants or default_variants(available)
    if not chosen:
        raise _bad(
            "pipeline",
            f"pipeline {name!r} has no runs yet: POST some to "
            "/api/v1/runs, or use POST /api/v1/plan with typical numbers",
        )
    model = None
    if what_if.workers is not None:
        _, points = scaling_model(session, pipeline)
        model = fit_usl(points) if points else None
    if what_if.failure_rate_per_instance_hour is not None:
        d = failure_defaults(session, pipeline)
        what_if = WhatIf(
            price=what_if.price,
            utilization_target=what_if.utilization_target,
            workers=what_if.workers,
            failure_rate_per_instance_hour=what_if.failure_rate_per_instance_hour,
            checkpoint_interval_hours=what_if.checkpoint_interval_hours or d.interval_hours,
            resume_hours=d.restart_hours,
            reschedule_hours=0.0,
        )
    current = runs_of(session, pipeline, chosen[0], recent)
    out = {}
    for variant in chosen:
        rows = current if variant == chosen[0] else runs_of(session, pipeline, variant, recent)
        out[variant] = project_costs(
            [r.facts for r in rows],
            cadences,
            convention=convention,
            budget_usd=budget if budget is not None else pipeline.monthly_budget_usd,
            current_runs_per_week=pipeline.runs_per_week,
            what_if=None if what_if.is_empty else what_if,
            scaling_model=model,
            current_runs=[r.facts for r in current],
        )
    return ProjectionOut(
        pipeline=name,
        variants=chosen,
        current_variant=chosen[0],
        projections=out,
        available_variants=available,
    )


def current_monthly_cost(session: Session, pipeline: Pipeline) -> float | None:
    """The projected monthly cost at the pipeline's current cadence, from its default
    variant's recent runs (what ``GET .../projection?cadences=<runs_per_week>`` shows);
    None when there is nothing to project. Used by the overview, /metrics and alerts."""
    try:
        out = projection(
            session,
            pipeline.name,
            variants=None,
            cadences=[pipeline.runs_per_week],
            what_if=WhatIf(),
            convention=CALENDAR,
            budget=None,
        )
    except (CadenceError, PlanningError):  # no runs yet, or nothing to project
        return None
    variant = out.current_variant or out.variants[0]
    return out.projections[variant].cadences[0].monthly_cost_usd


def gate(
    session: Session,
    name: str,
    *,
    baseline: str,
    candidate: str,
    cadence: float | None,
    budget: float | None,
    thresholds: GateThresholds,
    convention: str,
    recent: int = GATE_RUNS,
) -> GateOut:
    pipeline = get_by_name(session, name)
    budget = budget if budget is not None else pipeline.monthly_budget_usd
    if budget is None:
        raise _bad(
            "budget",
            f"pipeline {name!r} has no monthly budget: pass budget=... or PUT one on the pipeline",
        )
    target = cadence if cadence is not None else 2.0 * pipeline.runs_per_week
    base_rows = repo.recent_runs(session, pipeline.id, variant=baseline, limit=recent)
    cand_rows = repo.recent_runs(session, pipeline.id, variant=candidate, limit=recent)
    result = evaluate_gate(
        [r.facts for r in base_rows],
        [r.facts for r in cand_rows],
        higher_is_better=pipeline.higher_is_better,
        target_runs_per_week=target,
        budget_usd=budget,
        convention=convention,
        thresholds=thresholds,
    )
    return GateOut(
        pipeline=name,
        baseline=baseline,
        candidate=candidate,
        target_runs_per_week=target,
        budget_usd=budget,
        quality_metric=pipeline.quality_metric,
        higher_is_better=pipeline.higher_is_better,
        result=result,
    )


def scaling(session: Session, name: str, *, variant: str | None, workers: int | None) -> ScalingOut:
    pipeline = get_by_name(session, name)
    chosen, points = scaling_model(session, pipeline, variant)
    table = scaling_table(points) if points else []
    model: ScalingModel | None = fit_usl(points) if points else None
    base = repo.recent_runs(
        session, pipeline.id, variant="baseline", limit=RECENT_RUNS
    ) or repo.recent_runs(session, pipeline.id, limit=RECENT_RUNS)
    utilization = statistics.median(r.facts.gpu_utilization for r in base) if base else None
    efficiency = table[-1].efficiency if len(table) >= 2 else None
    advice = (
        scaling_advice(utilization, efficiency, model=model)
        if utilization is not None
        else ["No runs yet: record runs (and short probes at several worker counts) first."]
    )
    prediction = None
    if workers is not None:
        if model is None:
            raise _bad(
                "workers",
                "no scaling model yet: record runs of one variant at two or "
                "more worker counts (short probes are enough)",
            )
        prediction = Prediction(
            workers=workers,
            wall_clock_hours=model.predict_wall_clock(workers),
            gpu_hours=model.predict_gpu_hours(workers),
            extrapolation=model.is_extrapolation(workers),
        )
    return ScalingOut(
        pipeline=name,
        variant=chosen,
        table=table,
        model=model,
        advice=advice,
        prediction=prediction,
        utilization=utilization,
    )


def levers(
    session: Session, name: str, *, variant: str | None, cadence: float | None, convention: str
) -> LeversOut:
    pipeline = get_by_name(session, name)
    chosen = variant or (default_variants(_variant_names(session, pipeline)) or ["baseline"])[0]
    rows = runs_of(session, pipeline, chosen, RECENT_RUNS)
    target = cadence if cadence is not None else pipeline.runs_per_week
    per_month = runs_per_month(target, convention)
    utilization = statistics.median(r.facts.gpu_utilization for r in rows)
    _, points = scaling_model(session, pipeline)
    table = scaling_table(points) if points else []
    efficiency = table[-1].efficiency if len(table) >= 2 else None
    ranked = rank_levers(
        [r.facts for r in rows],
        runs_per_month=per_month,
        utilization=utilization,
        efficiency=efficiency,
    )
    return LeversOut(
        pipeline=name, variant=chosen, runs_per_week=target, runs_per_month=per_month, levers=ranked
    )


def checkpoints(
    session: Session,
    name: str,
    *,
    variant: str | None,
    cadence: float | None,
    convention: str,
    instances: int | None,
    failure_rate: float | None,
    checkpoint_write_hours: float | None,
    checkpoint_interval_hours: float | None,
    restart_hours: float | None,
) -> CheckpointsOut:
    pipeline = get_by_name(session, name)
    chosen = variant or (default_variants(_variant_names(session, pipeline)) or ["baseline"])[0]
    rows = runs_of(session, pipeline, chosen, RECENT_RUNS)
    d = failure_defaults(session, pipeline)
    exposure = repo.failure_exposure(session, pipeline.id)
    estimate = estimate_failure_rate(exposure.interruptions, exposure.instance_hours)
    wall = statistics.median(r.facts.wall_clock_hours for r in rows)
    inputs: dict[str, InputSource] = {}

    def pick(key: str, given: float | None, recorded: float, source: str, note: str) -> float:
        if given is not None:
            inputs[key] = InputSource(value=given, source="query")
            return given
        inputs[key] = InputSource.model_validate(
            {"value": recorded, "source": source, "note": note}
        )
        return recorded

    workers = int(
        pick(
            "instances",
            instances,
            statistics.median(r.facts.workers for r in rows),
            "recorded",
            "median workers of recent runs; each worker counted as one instance",
        )
    )
    rate = pick(
        "failure_rate",
        failure_rate,
        d.rate,
        d.rate_source,
        "interruptions per instance-hour"
        if d.rate_source == "recorded"
        else "planning default (fewer than 3 recorded interruptions)",
    )
    interval = pick(
        "checkpoint_interval_hours",
        checkpoint_interval_hours,
        d.interval_hours,
        "recorded" if exposure.interruptions else "default",
        "2 x mean progress lost per failure"
        if exposure.interruptions
        else "assumed hourly checkpoints",
    )
    ckpt = statistics.median(r.facts.checkpoint_hours for r in rows)
    write = pick(
        "checkpoint_write_hours",
        checkpoint_write_hours,
        write_hours_per_checkpoint(ckpt, wall, interval),
        "recorded",
        "median blocking checkpoint hours / checkpoints per run",
    )
    restart = pick(
        "restart_hours",
        restart_hours,
        d.restart_hours,
        "recorded" if exposure.interruptions else "default",
        "mean resume + reschedule time per interruption",
    )
    target = cadence if cadence is not None else pipeline.runs_per_week
    price = statistics.median(r.facts.price_per_gpu_hour for r in rows)
    inputs["wall_clock_hours"] = InputSource(
        value=wall, source="recorded", note="median of recent runs"
    )
    if write <= 0:
        raise _bad(
            "checkpoint_write_hours",
            "recorded runs show no blocking checkpoint time; pass checkpoint_write_hours",
        )
    advice = checkpoint_advice(
        write_hours=write,
        current_interval_hours=interval,
        workers=max(1, workers),
        wall_clock_hours=wall,
        runs_per_month=runs_per_month(target, convention),
        price_per_gpu_hour=price,
        failure_rate_per_instance_hour=rate,
        resume_hours=restart,
    )
    return CheckpointsOut(
        pipeline=name, inputs=inputs, failure_rate_estimate=estimate, advice=advice
    )
