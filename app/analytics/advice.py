"""Where to act: scaling advice, ranked levers and checkpoint advice, under one scenario.

Every dollar here uses the scenario's price and every monthly figure its target cadence
and month convention, over the same window of recent runs as the projection.
"""

from __future__ import annotations

import statistics

from sqlalchemy.orm import Session

from app.analytics import repository as repo
from app.analytics.schemas import (
    CheckpointsOut,
    InputSource,
    LeversOut,
    Prediction,
    ScalingOut,
)
from app.analytics.service import (
    FailureDefaults,
    _bad,
    _variant_names,
    default_variants,
    echo,
    failure_defaults,
    runs_of,
    scaling_model,
    window,
)
from app.db.models import Pipeline
from app.pipelines.service import get_by_name
from app.planning.failures import (
    checkpoint_advice,
    estimate_failure_rate,
    write_hours_per_checkpoint,
)
from app.planning.levers import rank_levers
from app.planning.projection import runs_per_month
from app.planning.scaling import ScalingModel, fit_usl, scaling_advice, scaling_table
from app.planning.scenario import RUN_WINDOW, Scenario


def _price(rows: list[repo.RunRow], scenario: Scenario) -> float:
    """The scenario's price, else the median price the runs are projected at."""
    if scenario.price is not None:
        return scenario.price
    return float(statistics.median(r.facts.price_per_gpu_hour for r in rows))


def scaling(
    session: Session, name: str, *, variant: str | None, workers: int | None, scenario: Scenario
) -> ScalingOut:
    pipeline = get_by_name(session, name)
    chosen, points = scaling_model(session, pipeline, variant)
    table = scaling_table(points) if points else []
    model: ScalingModel | None = fit_usl(points) if points else None
    base = repo.recent_runs(
        session, pipeline.id, variant=pipeline.production_variant, limit=RUN_WINDOW
    ) or repo.recent_runs(session, pipeline.id, limit=RUN_WINDOW)
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


def _default_variant(session: Session, pipeline: Pipeline) -> str:
    """The production variant (else the most-run one, else "baseline")."""
    names = default_variants(_variant_names(session, pipeline), pipeline.production_variant)
    return (names or ["baseline"])[0]


def levers(session: Session, name: str, *, variant: str | None, scenario: Scenario) -> LeversOut:
    pipeline = get_by_name(session, name)
    chosen = variant or _default_variant(session, pipeline)
    rows = runs_of(session, pipeline, chosen, RUN_WINDOW)
    target = scenario.target(pipeline.runs_per_week)
    per_month = runs_per_month(target, scenario.convention)
    utilization = statistics.median(r.facts.gpu_utilization for r in rows)
    _, points = scaling_model(session, pipeline)
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
        pipeline=name,
        variant=chosen,
        runs_per_week=target,
        runs_per_month=per_month,
        levers=ranked,
        scenario=echo(pipeline, scenario),
        window=window(chosen, rows),
    )


def checkpoints(
    session: Session,
    name: str,
    *,
    variant: str | None,
    scenario: Scenario,
    instances: int | None,
    checkpoint_write_hours: float | None,
    restart_hours: float | None,
) -> CheckpointsOut:
    """Checkpoint advice at the scenario's cadence, price, failure rate and interval.

    Instances (failure domains) set the MTBF only; the GPU-hours a pause or a failure
    costs are hours x the GPUs the runs pay for (median G / T), methodology.md §4."""
    pipeline = get_by_name(session, name)
    chosen = variant or _default_variant(session, pipeline)
    rows = runs_of(session, pipeline, chosen, RUN_WINDOW)
    exposure = repo.failure_exposure(session, pipeline.id)
    estimate = estimate_failure_rate(exposure.interruptions, exposure.instance_hours)
    picked = _Picked()
    wall, paid, price = _run_inputs(picked, rows, scenario)
    recorded = bool(exposure.interruptions)
    d = failure_defaults(session, pipeline)
    n_instances, rate, interval, restart = _failure_inputs(
        picked, rows, d, recorded, scenario, (instances, restart_hours)
    )
    ckpt = statistics.median(r.facts.checkpoint_hours for r in rows)
    write = picked.pick(
        "checkpoint_write_hours",
        checkpoint_write_hours,
        write_hours_per_checkpoint(ckpt, wall, interval),
        "recorded",
        "median blocking checkpoint hours / checkpoints per run",
    )
    target = scenario.target(pipeline.runs_per_week)
    if write <= 0:
        raise _bad(
            "checkpoint_write_hours",
            "recorded runs show no blocking checkpoint time; pass checkpoint_write_hours",
        )
    advice = checkpoint_advice(
        write_hours=write,
        current_interval_hours=interval,
        workers=paid,
        wall_clock_hours=wall,
        runs_per_month=runs_per_month(target, scenario.convention),
        price_per_gpu_hour=price,
        failure_rate_per_instance_hour=rate,
        resume_hours=restart,
        instances=max(1, n_instances),
    )
    return CheckpointsOut(
        pipeline=name,
        inputs=picked.sources,
        failure_rate_estimate=estimate,
        advice=advice,
        scenario=echo(pipeline, scenario),
        window=window(chosen, rows),
    )


class _Picked:
    """The advice's inputs and where each came from (the answer's ``inputs``)."""

    def __init__(self) -> None:
        self.sources: dict[str, InputSource] = {}

    def pick(self, key: str, given: float | None, recorded: float, source: str, note: str) -> float:
        """The query's value when given, else ``recorded`` with its source and note."""
        if given is not None:
            self.sources[key] = InputSource(value=given, source="query")
            return given
        self.sources[key] = InputSource.model_validate(
            {"value": recorded, "source": source, "note": note}
        )
        return recorded


def _run_inputs(
    picked: _Picked, rows: list[repo.RunRow], scenario: Scenario
) -> tuple[float, float, float]:
    """(wall clock h, paid GPUs, price) of the recent runs (the scenario's price if given)."""
    wall = statistics.median(r.facts.wall_clock_hours for r in rows)
    paid = statistics.median(r.facts.effective_workers for r in rows)
    price = _price(rows, scenario)
    picked.pick("wall_clock_hours", None, wall, "recorded", "median of recent runs")
    picked.pick(
        "paid_gpus", None, paid, "recorded", "median G / T of recent runs: what a lost hour costs"
    )
    given = scenario.price is not None
    picked.sources["price_per_gpu_hour"] = InputSource(
        value=price,
        source="query" if given else "recorded",
        note="scenario price" if given else "median price of recent runs",
    )
    return wall, paid, price


def _failure_inputs(
    picked: _Picked,
    rows: list[repo.RunRow],
    d: FailureDefaults,
    recorded: bool,
    scenario: Scenario,
    given: tuple[int | None, float | None],
) -> tuple[int, float, float, float]:
    """(instances, failure rate, checkpoint interval, restart hours): the query's (the
    scenario's for the rate and interval, ``given`` = (instances, restart hours)), else
    what the recorded runs and interruptions suggest (``recorded``: any interruption)."""
    instances, restart_hours = given
    n_instances = int(
        picked.pick(
            "instances",
            instances,
            statistics.median(r.facts.workers for r in rows),
            "recorded",
            "median workers of recent runs; each worker one failure domain",
        )
    )
    rate = picked.pick(
        "failure_rate",
        scenario.failure_rate,
        d.rate,
        d.rate_source,
        "interruptions per instance-hour"
        if d.rate_source == "recorded"
        else "planning default (fewer than 3 recorded interruptions)",
    )
    interval = picked.pick(
        "checkpoint_interval_hours",
        scenario.checkpoint_interval_hours,
        d.interval_hours,
        "recorded" if recorded else "default",
        "2 x mean progress lost per failure" if recorded else "assumed hourly checkpoints",
    )
    restart = picked.pick(
        "restart_hours",
        restart_hours,
        d.restart_hours,
        "recorded" if recorded else "default",
        "mean resume + reschedule time per interruption",
    )
    return n_instances, rate, interval, restart
