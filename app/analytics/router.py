"""Planning endpoints: projection, goodput, gate, scaling, levers, checkpoints, plan."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query

from app.analytics import plan as plan_service
from app.analytics import service, weekly
from app.analytics.schemas import (
    CheckpointsOut,
    GateOut,
    GoodputOut,
    LeversOut,
    PlanIn,
    PlanOut,
    ProjectionOut,
    ScalingOut,
)
from app.deps import DatabaseDep, ReadablePipeline
from app.exceptions import Invalid
from app.planning.gate import GateThresholds
from app.planning.projection import CALENDAR, MonthConvention
from app.planning.whatif import WhatIf

router = APIRouter(prefix="/api/v1", tags=["planning"])

Price = Annotated[float | None, Query(ge=0, le=10_000, description="USD per GPU-hour")]
Cadence = Annotated[float | None, Query(ge=0.01, le=100, description="Runs per week")]
MonthQuery = Annotated[
    MonthConvention, Query(description="calendar = 52/12 weeks per month; four_week = 4")
]
Variant = Annotated[str | None, Query(max_length=64)]


def parse_cadences(text: str) -> list[float]:
    try:
        values = [float(part) for part in text.split(",") if part.strip()]
    except ValueError as exc:
        raise Invalid(
            "cadences: expected runs per week such as 1,2",
            fields=[{"field": "cadences", "reason": "expected numbers such as 1,2"}],
        ) from exc
    if not values or len(values) > 20 or any(not 0 < v <= 1000 for v in values):
        raise Invalid(
            "cadences: give 1 to 20 runs-per-week values in (0, 1000]",
            fields=[{"field": "cadences", "reason": "1 to 20 values in (0, 1000]"}],
        )
    return values


def parse_variants(text: str | None) -> list[str] | None:
    if not text:
        return None
    return [v.strip() for v in text.split(",") if v.strip()][:5] or None


@router.get("/pipelines/{name}/projection", response_model=ProjectionOut)
def get_projection(
    name: ReadablePipeline,
    db: DatabaseDep,
    variant: Annotated[str | None, Query(description="Variant(s), comma-separated")] = None,
    cadences: Annotated[str, Query(description="Runs per week, e.g. 1,2")] = "1,2",
    price: Price = None,
    utilization_target: Annotated[float | None, Query(ge=0.01, le=1)] = None,
    workers: Annotated[int | None, Query(ge=1, le=100_000)] = None,
    failure_rate: Annotated[float | None, Query(ge=0, le=0.1)] = None,
    checkpoint_interval_hours: Annotated[float | None, Query(ge=0.01, le=1000)] = None,
    budget: Annotated[float | None, Query(ge=0, le=1e12)] = None,
    weeks_per_month: MonthQuery = CALENDAR,
    recent: Annotated[int, Query(ge=1, le=200)] = service.RECENT_RUNS,
) -> ProjectionOut:
    """Monthly cost at each cadence from the recent runs of each variant, with what-ifs."""
    what_if = WhatIf(
        price=price,
        utilization_target=utilization_target,
        workers=workers,
        failure_rate_per_instance_hour=failure_rate,
        checkpoint_interval_hours=checkpoint_interval_hours,
    )
    with db.read() as session:
        return service.projection(
            session,
            name,
            variants=parse_variants(variant),
            cadences=parse_cadences(cadences),
            what_if=what_if,
            convention=weeks_per_month,
            budget=budget,
            recent=recent,
        )


@router.get("/pipelines/{name}/goodput", response_model=GoodputOut)
def get_goodput(
    name: ReadablePipeline,
    db: DatabaseDep,
    group: Annotated[str, Query(pattern="^week$", description="Only `week` for now")] = "week",
    weeks: Annotated[int, Query(ge=1, le=260)] = 12,
    until: Annotated[
        datetime | None, Query(description="Last week shown (default: latest run)")
    ] = None,
) -> GoodputOut:
    """Scheduling x runtime x program goodput per ISO week, with badput by cause."""
    with db.read() as session:
        return weekly.goodput(session, name, weeks=weeks, until=until)


@router.get("/pipelines/{name}/gate", response_model=GateOut)
def get_gate(
    name: ReadablePipeline,
    db: DatabaseDep,
    baseline: Annotated[str, Query(max_length=64)] = "baseline",
    candidate: Annotated[str, Query(max_length=64)] = "candidate",
    cadence: Cadence = None,
    budget: Annotated[float | None, Query(ge=0, le=1e12)] = None,
    min_uplift_points: Annotated[float, Query(ge=0, le=100)] = 10.0,
    quality_margin: Annotated[float, Query(ge=0, le=1e6)] = 0.01,
    alpha: Annotated[float, Query(gt=0, lt=0.5)] = 0.05,
    min_runs: Annotated[int, Query(ge=2, le=1000)] = 3,
    weeks_per_month: MonthQuery = CALENDAR,
) -> GateOut:
    """May the candidate move to the target cadence? PASS, FAIL or INSUFFICIENT_DATA."""
    thresholds = GateThresholds(
        min_utilization_uplift_points=min_uplift_points,
        quality_margin=quality_margin,
        alpha=alpha,
        min_runs=min_runs,
    )
    with db.read() as session:
        return service.gate(
            session,
            name,
            baseline=baseline,
            candidate=candidate,
            cadence=cadence,
            budget=budget,
            thresholds=thresholds,
            convention=weeks_per_month,
        )


@router.get("/pipelines/{name}/scaling", response_model=ScalingOut)
def get_scaling(
    name: ReadablePipeline,
    db: DatabaseDep,
    variant: Variant = None,
    workers: Annotated[int | None, Query(ge=1, le=100_000)] = None,
) -> ScalingOut:
    """Speedup and efficiency by worker count, the USL fit, and a prediction."""
    with db.read() as session:
        return service.scaling(session, name, variant=variant, workers=workers)


@router.get("/pipelines/{name}/levers", response_model=LeversOut)
def get_levers(
    name: ReadablePipeline,
    db: DatabaseDep,
    variant: Variant = None,
    cadence: Cadence = None,
    weeks_per_month: MonthQuery = CALENDAR,
) -> LeversOut:
    """Badput causes ranked by monthly cost at the cadence, with remedies and savings."""
    with db.read() as session:
        return service.levers(
            session, name, variant=variant, cadence=cadence, convention=weeks_per_month
        )


@router.get("/pipelines/{name}/checkpoints", response_model=CheckpointsOut)
def get_checkpoints(
    name: ReadablePipeline,
    db: DatabaseDep,
    variant: Variant = None,
    cadence: Cadence = None,
    instances: Annotated[int | None, Query(ge=1, le=1_000_000)] = None,
    failure_rate: Annotated[float | None, Query(ge=1e-9, le=0.1)] = None,
    checkpoint_write_hours: Annotated[float | None, Query(ge=1e-4, le=1000)] = None,
    checkpoint_interval_hours: Annotated[float | None, Query(ge=0.01, le=1000)] = None,
    restart_hours: Annotated[float | None, Query(ge=0, le=1000)] = None,
    weeks_per_month: MonthQuery = CALENDAR,
) -> CheckpointsOut:
    """Current vs Young/Daly optimal checkpoint interval, ETTR, and the monthly saving."""
    with db.read() as session:
        return service.checkpoints(
            session,
            name,
            variant=variant,
            cadence=cadence,
            convention=weeks_per_month,
            instances=instances,
            failure_rate=failure_rate,
            checkpoint_write_hours=checkpoint_write_hours,
            checkpoint_interval_hours=checkpoint_interval_hours,
            restart_hours=restart_hours,
        )


@router.post("/plan", response_model=PlanOut)
def post_plan(body: PlanIn) -> PlanOut:
    """The same arithmetic from numbers given directly, for teams with no recorded runs."""
    return plan_service.plan(body)
