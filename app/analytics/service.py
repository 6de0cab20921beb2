"""Planning answers for recorded pipelines: SQL reads in, pure planning functions out."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any, cast

from sqlalchemy.orm import Session

from app.analytics import bill_now, month
from app.analytics.missing import NotEnoughData
from app.analytics.reads import RunReads, RunRow, default_variants, read_runs
from app.analytics.schemas import (
    CriterionOut,
    GateOut,
    GateResultOut,
    ProjectionOut,
    ScenarioOut,
)
from app.analytics.series_context import series_context
from app.db.engine import status_thresholds_of
from app.db.models import Pipeline
from app.exceptions import Invalid
from app.pipelines.service import get_by_name
from app.planning.budget_status import DEFAULT_RISK_TOLERANCE
from app.planning.cost_basis import CostBasis
from app.planning.failures import DEFAULT_FAILURE_RATE, estimate_failure_rate
from app.planning.gate import GateResult, GateThresholds, evaluate_gate
from app.planning.gate_words import GateContext, GateWords, gate_words
from app.planning.model import PlanningError
from app.planning.month_to_date import MonthToDate
from app.planning.projection import (
    project_costs,
)
from app.planning.scaling import ScalingModel, fit_usl
from app.planning.scenario import RunWindow, Scenario, window_of
from app.planning.sources import gate_source_warnings
from app.planning.whatif import WhatIf

DEFAULT_CHECKPOINT_INTERVAL_HOURS = 1.0


def _bad(field: str, reason: str) -> Invalid:
    return Invalid(f"{field}: {reason}", fields=[{"field": field, "reason": reason}])


def runs_of(
    pipeline: Pipeline, runs: RunReads, variant: str, field: str = "variant"
) -> list[RunRow] | NotEnoughData:
    rows = runs.window(variant)
    if not rows:
        known = ", ".join(runs.names) or "none yet"
        return NotEnoughData(
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


def failure_defaults(runs: RunReads) -> FailureDefaults:
    """Checkpoint interval, restart time and failure rate as recorded runs suggest.

    Progress lost at a failure averages half the checkpoint interval, so the interval is
    estimated as 2 x mean lost progress; the failure rate is interruptions per
    instance-hour when at least 3 were recorded, else the planning default 4e-4.
    """
    exposure = runs.exposure()
    interval = DEFAULT_CHECKPOINT_INTERVAL_HOURS
    if exposure.mean_lost_progress_hours:
        interval = 2.0 * exposure.mean_lost_progress_hours
    estimate = estimate_failure_rate(exposure.interruptions, exposure.instance_hours)
    if estimate is not None and estimate.sufficient and estimate.rate > 0:
        rate, source = estimate.rate, "recorded"
    else:
        rate, source = DEFAULT_FAILURE_RATE, "default"
    return FailureDefaults(interval, exposure.mean_restart_hours or 0.0, rate, source)


def window(variant: str, rows: list[RunRow]) -> RunWindow:
    return window_of(variant, [r.started_at for r in rows])


def scenario_inputs(
    runs: RunReads, scenario: Scenario
) -> tuple[WhatIf | None, ScalingModel | None]:
    """The run-level what-ifs of a scenario, completed from what the runs recorded (the
    checkpoint interval and restart time a failure-rate what-if needs), and the scaling
    model a workers what-if needs. None when the scenario changes nothing per run."""
    model = None
    if scenario.workers is not None and runs.scaling_points:
        model = fit_usl(list(runs.scaling_points))
    interval, restart, recorded = None, 0.0, None
    if scenario.failure_rate is not None:
        d = failure_defaults(runs)
        interval, restart = d.interval_hours, d.restart_hours
        # The recorded rate, the page's default, keeps the recorded loss: a no-op.
        recorded = d.rate if d.rate_source == "recorded" else None
    what_if = scenario.what_if(
        default_interval_hours=interval, resume_hours=restart, recorded_failure_rate=recorded
    )
    return (None if what_if.is_empty else what_if), model


def echo(
    pipeline: Pipeline,
    scenario: Scenario,
    cost_basis: str | None = None,
    risk_tolerance: float = DEFAULT_RISK_TOLERANCE,
) -> ScenarioOut:
    """The scenario as applied: given values plus the defaults they resolved to, and the
    cost basis budget verdicts read (the gate's own when it was given one)."""
    price_note = (
        f"${scenario.price:g}/GPU-h on every run"
        if scenario.price is not None
        else f"each run's own price, else the pipeline's ${pipeline.price_per_gpu_hour:g}/GPU-h"
    )
    return ScenarioOut(
        **asdict(scenario),
        target_runs_per_week=scenario.target(pipeline.runs_per_week),
        current_runs_per_week=pipeline.runs_per_week,
        budget_usd=scenario.budget_or(pipeline.monthly_budget_usd),
        price_used=price_note,
        cost_basis=cost_basis or pipeline.gate_cost_basis,
        risk_tolerance=risk_tolerance,
    )


def projection_of(
    session: Session,
    name: str,
    *,
    variants: list[str] | None,
    cadences: list[float] | None,
    scenario: Scenario,
) -> ProjectionOut | NotEnoughData:
    """:func:`projection` of a pipeline by name, with this month so far."""
    pipeline = get_by_name(session, name)
    # Today is production's bill whatever variant is asked for (cadence check --variant).
    wanted = (*variants, pipeline.production_variant) if variants else ()
    runs = read_runs(session, pipeline, wanted)
    mtd = month.months(session, [pipeline]).get(pipeline.id)
    return projection(
        pipeline,
        runs,
        variants=variants,
        cadences=cadences,
        scenario=scenario,
        month_to_date=mtd,
        risk_tolerance=status_thresholds_of(session).risk_tolerance,
    )


def projection(
    pipeline: Pipeline,
    runs: RunReads,
    *,
    variants: list[str] | None,
    cadences: list[float] | None,
    scenario: Scenario,
    month_to_date: MonthToDate | None = None,
    risk_tolerance: float = DEFAULT_RISK_TOLERANCE,
) -> ProjectionOut | NotEnoughData:
    """Monthly cost of each variant at the given cadences plus the scenario's target,
    from the newest RUN_WINDOW runs of each variant, under the scenario's what-ifs, and
    this month so far when the caller read it (the value section reads only the
    cadences)."""
    available = runs.names
    chosen = variants or default_variants(available, pipeline.production_variant)
    if not chosen:
        return NotEnoughData(
            "pipeline",
            f"pipeline {pipeline.name!r} has no runs yet: POST some to "
            "/api/v1/runs, or use POST /api/v1/plan with typical numbers",
        )
    target = scenario.target(pipeline.runs_per_week)
    wanted = sorted({*(cadences or [1.0, 2.0]), target})
    what_if, model = scenario_inputs(runs, scenario)
    budget = scenario.budget_or(pipeline.monthly_budget_usd)
    current = _today(pipeline, runs, chosen[0], scenario.convention)
    if isinstance(current, NotEnoughData):
        return current
    today_rows, today_usd = current
    out, windows = {}, {}
    for variant in chosen:
        rows = runs_of(pipeline, runs, variant)
        if isinstance(rows, NotEnoughData):
            return rows
        windows[variant] = window(variant, rows)
        out[variant] = project_costs(
            [r.facts for r in rows],
            wanted,
            convention=scenario.convention,
            budget_usd=budget,
            current_runs_per_week=pipeline.runs_per_week,
            what_if=what_if,
            scaling_model=model,
            current_runs=[r.facts for r in today_rows],
            risk_tolerance=risk_tolerance,
            series=series_context(runs, variant, rows),
            current_cost_usd=today_usd,
        )
    return ProjectionOut(
        pipeline=pipeline.name,
        variants=chosen,
        current_variant=chosen[0],
        projections=out,
        available_variants=available,
        scenario=echo(pipeline, scenario, risk_tolerance=risk_tolerance),
        windows=windows,
        month_to_date=month_to_date,
    )


def _today(
    pipeline: Pipeline, runs: RunReads, first: str, convention: str
) -> tuple[list[RunRow], float] | NotEnoughData:
    """Today's runs and expected bill: the production variant's (the page's "today"),
    whichever variant is projected; a pipeline with no production runs measures from the
    first variant shown."""
    production = pipeline.production_variant
    today = production if runs.window(production) else first
    rows = runs_of(pipeline, runs, today)
    if isinstance(rows, NotEnoughData):
        return rows
    return rows, bill_now.bill_today(pipeline, runs, today, convention)


def gate_of(
    session: Session,
    name: str,
    *,
    baseline: str,
    candidate: str,
    scenario: Scenario,
    thresholds: GateThresholds,
) -> GateOut | NotEnoughData:
    """:func:`gate` of a pipeline by name."""
    pipeline = get_by_name(session, name)
    runs = read_runs(session, pipeline, (baseline, candidate))
    return gate(
        pipeline,
        runs,
        baseline=baseline,
        candidate=candidate,
        scenario=scenario,
        thresholds=thresholds,
    )


def gate(
    pipeline: Pipeline,
    runs: RunReads,
    *,
    baseline: str,
    candidate: str,
    scenario: Scenario,
    thresholds: GateThresholds,
) -> GateOut | NotEnoughData:
    """The gate at the scenario's target cadence, on the same run window and what-ifs as
    the projection, so its cost criterion shows the projection's number."""
    name = pipeline.name
    budget = scenario.budget_or(pipeline.monthly_budget_usd)
    if budget is None:
        return NotEnoughData(
            "budget",
            f"pipeline {name!r} has no monthly budget: pass budget=... or PUT one on the pipeline",
        )
    target = scenario.target(pipeline.runs_per_week)
    base_rows, cand_rows = runs.window(baseline), runs.window(candidate)
    what_if, model = scenario_inputs(runs, scenario)
    result = evaluate_gate(
        [r.facts for r in base_rows],
        [r.facts for r in cand_rows],
        higher_is_better=pipeline.higher_is_better,
        target_runs_per_week=target,
        budget_usd=budget,
        convention=scenario.convention,
        thresholds=thresholds,
        what_if=what_if,
        scaling_model=model,
        current_runs_per_week=pipeline.runs_per_week,
        series=series_context(runs, candidate, cand_rows),
    )
    warnings = gate_source_warnings(
        (r.utilization_source for r in base_rows), (r.utilization_source for r in cand_rows)
    )
    words = gate_words(result, GateContext(target, pipeline.runs_per_week, pipeline.quality_metric))
    return GateOut(
        pipeline=name,
        baseline=baseline,
        candidate=candidate,
        target_runs_per_week=target,
        budget_usd=budget,
        quality_metric=pipeline.quality_metric,
        higher_is_better=pipeline.higher_is_better,
        verdict_label=words.verdict,
        headline=words.headline,
        result=with_words(result, words),
        scenario=echo(pipeline, scenario, thresholds.cost_basis, thresholds.risk_tolerance),
        windows={baseline: window(baseline, base_rows), candidate: window(candidate, cand_rows)},
        warnings=warnings,
    )


def with_words(result: GateResult, words: GateWords) -> GateResultOut:
    """The gate result with each criterion's plain words beside its numbers."""
    criteria = tuple(
        CriterionOut(
            **{f.name: getattr(c, f.name) for f in fields(c)},
            label=w.label,
            plain=w.plain,
            status_label=w.status_label,
        )
        for c, w in zip(result.criteria, words.criteria, strict=True)
    )
    values = {f.name: getattr(result, f.name) for f in fields(result)}
    return GateResultOut(**{**values, "criteria": criteria})


def gate_thresholds(
    pipeline: Pipeline,
    *,
    min_uplift_points: float = 10.0,
    quality_margin: float | None = None,
    alpha: float = 0.05,
    min_runs: int = 3,
    power: float | None = None,
    cost_basis: str | None = None,
    risk_tolerance: float = DEFAULT_RISK_TOLERANCE,
) -> GateThresholds:
    """Gate thresholds with the pipeline's quality margin, power and cost basis unless
    given; a PlanningError for values the gate cannot work with."""
    margin = pipeline.quality_margin if quality_margin is None else quality_margin
    return GateThresholds(
        min_utilization_uplift_points=min_uplift_points,
        quality_margin=margin,
        alpha=alpha,
        min_runs=min_runs,
        power=power or pipeline.gate_power,
        cost_basis=cast(CostBasis, cost_basis or pipeline.gate_cost_basis),
        risk_tolerance=risk_tolerance,
    )


def thresholds_for(pipeline: Pipeline, **given: Any) -> GateThresholds:
    """:func:`gate_thresholds` for an API request: a 422 naming ``gate`` when unusable."""
    try:
        return gate_thresholds(pipeline, **given)
    except PlanningError as exc:
        raise _bad("gate", str(exc)) from exc
