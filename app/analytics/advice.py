"""Where to act: scaling advice, ranked levers and checkpoint advice, under one scenario.

Every dollar here uses the scenario's price and every monthly figure its target cadence
and month convention, over the same window of recent runs as the projection.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from sqlalchemy.orm import Session

from app.analytics.missing import NotEnoughData
from app.analytics.reads import RunReads, RunRow, default_variants, read_runs
from app.analytics.schemas import (
    CheckpointsOut,
    InputSource,
    LeversOut,
    Prediction,
    ScalingOut,
)
from app.analytics.service import echo, failure_defaults, runs_of, window
from app.db import rollup_reads
from app.db.kept import KeptMap
from app.db.models import Pipeline
from app.pipelines.service import get_by_name, settings_key
from app.planning.failures import (
    checkpoint_advice,
    estimate_failure_rate,
    write_hours_per_checkpoint,
)
from app.planning.levers import rank_levers
from app.planning.projection import runs_per_month
from app.planning.scaling import ScalingModel, fit_usl, scaling_advice, scaling_table
from app.planning.scenario import RUN_WINDOW, Scenario

# The default variant's levers by (pipeline id, scenario) while its change count and
# settings are as read.
KEPT_LEVERS: KeptMap[tuple[int, Scenario], LeversOut | NotEnoughData] = KeptMap("levers")


def _price(rows: list[RunRow], scenario: Scenario) -> float:
    """The scenario's price, else the median price the runs are projected at."""
    if scenario.price is not None:
        return scenario.price
    return float(statistics.median(r.facts.price_per_gpu_hour for r in rows))


def scaling_of(
    session: Session, name: str, *, variant: str | None, workers: int | None, scenario: Scenario
) -> ScalingOut | NotEnoughData:
    """:func:`scaling` of a pipeline by name, with a prediction at ``workers``."""
    pipeline = get_by_name(session, name)
    out = scaling(pipeline, read_runs(session, pipeline, scaling=variant), scenario)
    if workers is None:
        return out
    model = out.model
    if model is None:
        return NotEnoughData(
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
    return out.model_copy(update={"prediction": prediction})


def scaling(pipeline: Pipeline, runs: RunReads, scenario: Scenario) -> ScalingOut:
    """Speedup and efficiency of the scaling variant (``runs.scaling_variant``), and the
    advice at the production variant's (else any variant's) newest runs."""
    points = list(runs.scaling_points)
    table = scaling_table(points) if points else []
    model: ScalingModel | None = fit_usl(points) if points else None
    base = runs.window(pipeline.production_variant) or runs.recent[-RUN_WINDOW:]
    utilization = statistics.median(r.facts.gpu_utilization for r in base) if base else None
    efficiency = table[-1].efficiency if len(table) >= 2 else None
    if utilization is not None:
        per_month = runs_per_month(scenario.target(pipeline.runs_per_week), scenario.convention)
        monthly_g = statistics.median(r.facts.gpu_hours for r in base) * per_month
        advice = scaling_advice(
            utilization,
            efficiency,
            model=model,
            monthly_gpu_hours=monthly_g,
            price_per_gpu_hour=_price(base, scenario),
        )
    else:
        advice = ["No runs yet: record runs (and short probes at several worker counts) first."]
    return ScalingOut(
        pipeline=pipeline.name,
        variant=runs.scaling_variant,
        table=table,
        model=model,
        advice=advice,
        prediction=None,
        utilization=utilization,
    )


def _default_variant(pipeline: Pipeline, runs: RunReads) -> str:
    """The production variant (else the most-run one, else "baseline")."""
    names = default_variants(runs.names, pipeline.production_variant)
    return (names or ["baseline"])[0]


def levers_of(
    session: Session, name: str, *, variant: str | None, scenario: Scenario
) -> LeversOut | NotEnoughData:
    pipeline = get_by_name(session, name)
    return levers(pipeline, read_runs(session, pipeline, (variant,)), variant, scenario)


def kept_levers(session: Session, name: str, scenario: Scenario) -> LeversOut | NotEnoughData:
    """:func:`levers_of` the default variant, kept between requests while the pipeline's
    runs (its change count), its settings and the scenario are the same: the weekly review
    ranks the levers of its five costliest pipelines on every view (~20 ms each). The
    change count is the request's snapshot of every counter, which the review has read
    already (a statement per pipeline less)."""
    pipeline = get_by_name(session, name)
    count = rollup_reads.change_counts(session).get(pipeline.id, 0)
    key = ((pipeline.id, scenario), (count, settings_key(pipeline)))
    return KEPT_LEVERS.get(
        session,
        key,
        lambda: levers(pipeline, read_runs(session, pipeline, (None,)), None, scenario),
    )


def levers(
    pipeline: Pipeline, runs: RunReads, variant: str | None, scenario: Scenario
) -> LeversOut | NotEnoughData:
    chosen = variant or _default_variant(pipeline, runs)
    rows = runs_of(pipeline, runs, chosen)
    if isinstance(rows, NotEnoughData):
        return rows
    target = scenario.target(pipeline.runs_per_week)
    per_month = runs_per_month(target, scenario.convention)
    utilization = statistics.median(r.facts.gpu_utilization for r in rows)
    points = list(runs.scaling_points)
    table = scaling_table(points) if points else []
    efficiency = table[-1].efficiency if len(table) >= 2 else None
    ranked = rank_levers(
        [r.facts for r in rows],
        runs_per_month=per_month,
        price=scenario.price,
        utilization=utilization,
        efficiency=efficiency,
    )
    return LeversOut(
        pipeline=pipeline.name,
        variant=chosen,
        runs_per_week=target,
        runs_per_month=per_month,
        levers=ranked,
        scenario=echo(pipeline, scenario),
        window=window(chosen, rows),
    )


@dataclass(frozen=True)
class CheckpointInputs:
    """What a request may give instead of what the runs recorded."""

    instances: int | None = None
    checkpoint_write_hours: float | None = None
    restart_hours: float | None = None


def checkpoints_of(
    session: Session,
    name: str,
    *,
    variant: str | None,
    scenario: Scenario,
    given: CheckpointInputs,
) -> CheckpointsOut | NotEnoughData:
    pipeline = get_by_name(session, name)
    runs = read_runs(session, pipeline, (variant,))
    return checkpoints(pipeline, runs, variant=variant, scenario=scenario, given=given)


def checkpoints(
    pipeline: Pipeline,
    runs: RunReads,
    *,
    variant: str | None,
    scenario: Scenario,
    given: CheckpointInputs = CheckpointInputs(),
) -> CheckpointsOut | NotEnoughData:
    """Checkpoint advice at the scenario's cadence, price, failure rate and interval.

    Instances (failure domains) set the MTBF only; the GPU-hours a pause or a failure
    costs are hours x the GPUs the runs pay for (median G / T), methodology.md §4."""
    chosen = variant or _default_variant(pipeline, runs)
    rows = runs_of(pipeline, runs, chosen)
    if isinstance(rows, NotEnoughData):
        return rows
    inputs = _checkpoint_inputs(rows, runs, scenario, given)
    if inputs["checkpoint_write_hours"].value <= 0:
        return NotEnoughData(
            "checkpoint_write_hours",
            "recorded runs show no blocking checkpoint time; pass checkpoint_write_hours",
        )
    target = scenario.target(pipeline.runs_per_week)
    advice = checkpoint_advice(
        write_hours=inputs["checkpoint_write_hours"].value,
        current_interval_hours=inputs["checkpoint_interval_hours"].value,
        workers=inputs["paid_gpus"].value,
        wall_clock_hours=inputs["wall_clock_hours"].value,
        runs_per_month=runs_per_month(target, scenario.convention),
        price_per_gpu_hour=inputs["price_per_gpu_hour"].value,
        failure_rate_per_instance_hour=inputs["failure_rate"].value,
        resume_hours=inputs["restart_hours"].value,
        instances=max(1, int(inputs["instances"].value)),
    )
    exposure = runs.exposure()
    return CheckpointsOut(
        pipeline=pipeline.name,
        inputs=inputs,
        failure_rate_estimate=estimate_failure_rate(
            exposure.interruptions, exposure.instance_hours
        ),
        advice=advice,
        scenario=echo(pipeline, scenario),
        window=window(chosen, rows),
    )


def _checkpoint_inputs(
    rows: list[RunRow], runs: RunReads, scenario: Scenario, given: CheckpointInputs
) -> dict[str, InputSource]:
    """Each input of the advice: the request's value, else what the runs recorded, with
    its source and how it was read (the answer echoes them)."""
    d = failure_defaults(runs)
    interrupted = runs.exposure().interruptions > 0
    wall = statistics.median(r.facts.wall_clock_hours for r in rows)
    inputs: dict[str, InputSource] = {}

    def pick(key: str, value: float | None, recorded: float, source: str, note: str) -> float:
        if value is not None:
            inputs[key] = InputSource(value=value, source="query")
            return value
        inputs[key] = InputSource.model_validate(
            {"value": recorded, "source": source, "note": note}
        )
        return recorded

    workers = statistics.median(r.facts.workers for r in rows)
    note = "median workers of recent runs; each worker one failure domain"
    pick("instances", given.instances, workers, "recorded", note)
    recorded_rate = d.rate_source == "recorded"
    note = (
        "interruptions per instance-hour"
        if recorded_rate
        else "planning default (fewer than 3 recorded interruptions)"
    )
    pick("failure_rate", scenario.failure_rate, d.rate, d.rate_source, note)
    source = "recorded" if interrupted else "default"
    note = "2 x mean progress lost per failure" if interrupted else "assumed hourly checkpoints"
    asked = scenario.checkpoint_interval_hours
    interval = pick("checkpoint_interval_hours", asked, d.interval_hours, source, note)
    ckpt = statistics.median(r.facts.checkpoint_hours for r in rows)
    write = write_hours_per_checkpoint(ckpt, wall, interval)
    note = "median blocking checkpoint hours / checkpoints per run"
    pick("checkpoint_write_hours", given.checkpoint_write_hours, write, "recorded", note)
    note = "mean resume + reschedule time per interruption"
    pick("restart_hours", given.restart_hours, d.restart_hours, source, note)
    inputs["wall_clock_hours"] = InputSource(
        value=wall, source="recorded", note="median of recent runs"
    )
    inputs["paid_gpus"] = InputSource(
        value=statistics.median(r.facts.effective_workers for r in rows),
        source="recorded",
        note="median G / T of recent runs: what a lost hour costs",
    )
    inputs["price_per_gpu_hour"] = InputSource(
        value=_price(rows, scenario),
        source="query" if scenario.price is not None else "recorded",
        note="scenario price" if scenario.price is not None else "median price of recent runs",
    )
    return inputs
