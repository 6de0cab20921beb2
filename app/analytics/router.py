"""Planning endpoints: projection, goodput, gate, scaling, levers, checkpoints, plan."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from app.analytics import advice, record, service, weekly
from app.analytics import plan as plan_service
from app.analytics.missing import answered
from app.analytics.scenario import ScenarioDep
from app.analytics.schemas import (
    CheckpointsOut,
    ForecastRecordOut,
    GateOut,
    GoodputOut,
    LeversOut,
    PlanIn,
    PlanOut,
    ProjectionOut,
    ScalingOut,
)
from app.db.engine import status_thresholds_of
from app.deps import DatabaseDep, ReadablePipeline
from app.exceptions import Invalid
from app.pipelines.service import get_by_name
from app.planning.welch import ALPHA_MIN
from app.schemas_common import CostBasisIn, Timestamp

router = APIRouter(prefix="/api/v1", tags=["planning"])

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
    scenario: ScenarioDep,
    variant: Annotated[str | None, Query(description="Variant(s), comma-separated")] = None,
    cadences: Annotated[
        str, Query(description="Runs per week to chart, e.g. 1,2 (the scenario's is added)")
    ] = "1,2",
) -> ProjectionOut:
    """Monthly cost (median, p90, P(over budget)) at each cadence from each variant's
    newest runs, under the scenario; echoes the scenario and the run window used."""
    with db.read() as session:
        answer = service.projection_of(
            session,
            name,
            variants=parse_variants(variant),
            cadences=parse_cadences(cadences),
            scenario=scenario,
        )
    return answered(answer)


@router.get("/pipelines/{name}/goodput", response_model=GoodputOut)
def get_goodput(
    name: ReadablePipeline,
    db: DatabaseDep,
    group: Annotated[str, Query(pattern="^week$", description="Only `week` for now")] = "week",
    weeks: Annotated[int, Query(ge=1, le=260)] = 12,
    until: Annotated[
        Timestamp | None, Query(description="Last week shown (default: latest run)")
    ] = None,
) -> GoodputOut:
    """Scheduling x runtime x program goodput per ISO week, with badput by cause."""
    with db.read() as session:
        return weekly.goodput(session, name, weeks=weeks, until=until)


@router.get("/pipelines/{name}/gate", response_model=GateOut)
def get_gate(
    name: ReadablePipeline,
    db: DatabaseDep,
    scenario: ScenarioDep,
    baseline: Annotated[str, Query(max_length=64)] = "baseline",
    candidate: Annotated[str, Query(max_length=64)] = "candidate",
    min_uplift_points: Annotated[float, Query(ge=0, le=100)] = 10.0,
    quality_margin: Annotated[
        float | None, Query(ge=0, le=1e6, description="Default: the pipeline's setting")
    ] = None,
    alpha: Annotated[float, Query(ge=ALPHA_MIN, lt=0.5)] = 0.05,
    min_runs: Annotated[int, Query(ge=2, le=1000)] = 3,
    power: Annotated[float | None, Query(ge=0.5, le=0.99)] = None,
    cost_basis: Annotated[CostBasisIn | None, Query()] = None,
) -> GateOut:
    """May the candidate move to the scenario's cadence? PASS, FAIL or INSUFFICIENT_DATA."""
    with db.read() as session:
        pipeline = get_by_name(session, name)
        thresholds = service.thresholds_for(
            pipeline,
            min_uplift_points=min_uplift_points,
            quality_margin=quality_margin,
            alpha=alpha,
            min_runs=min_runs,
            power=power,
            cost_basis=cost_basis,
            risk_tolerance=status_thresholds_of(session).risk_tolerance,
        )
        answer = service.gate_of(
            session,
            name,
            baseline=baseline,
            candidate=candidate,
            scenario=scenario,
            thresholds=thresholds,
        )
    return answered(answer)


@router.get("/pipelines/{name}/scaling", response_model=ScalingOut)
def get_scaling(
    name: ReadablePipeline,
    db: DatabaseDep,
    scenario: ScenarioDep,
    variant: Variant = None,
    workers: Annotated[int | None, Query(ge=1, le=100_000)] = None,
) -> ScalingOut:
    """Speedup and efficiency by worker count, the USL fit, and a prediction."""
    with db.read() as session:
        answer = advice.scaling_of(
            session, name, variant=variant, workers=workers, scenario=scenario
        )
    return answered(answer)


@router.get("/pipelines/{name}/levers", response_model=LeversOut)
def get_levers(
    name: ReadablePipeline, db: DatabaseDep, scenario: ScenarioDep, variant: Variant = None
) -> LeversOut:
    """Badput causes ranked by monthly cost at the scenario's cadence and price."""
    with db.read() as session:
        answer = advice.levers_of(session, name, variant=variant, scenario=scenario)
    return answered(answer)


@router.get("/pipelines/{name}/checkpoints", response_model=CheckpointsOut)
def get_checkpoints(
    name: ReadablePipeline,
    db: DatabaseDep,
    scenario: ScenarioDep,
    variant: Variant = None,
    instances: Annotated[
        int | None, Query(ge=1, le=1_000_000, description="Failure domains: set the MTBF only")
    ] = None,
    checkpoint_write_hours: Annotated[float | None, Query(ge=1e-4, le=1000)] = None,
    restart_hours: Annotated[float | None, Query(ge=0, le=1000)] = None,
) -> CheckpointsOut:
    """Current vs Young/Daly optimal checkpoint interval, ETTR, and the monthly saving."""
    with db.read() as session:
        given = advice.CheckpointInputs(instances, checkpoint_write_hours, restart_hours)
        answer = advice.checkpoints_of(
            session, name, variant=variant, scenario=scenario, given=given
        )
    return answered(answer)


@router.get("/pipelines/{name}/forecast-record", response_model=ForecastRecordOut)
def get_forecast_record(
    name: ReadablePipeline,
    db: DatabaseDep,
    months: Annotated[int, Query(ge=1, le=record.MAX_MONTHS, description="Closed months")] = 12,
) -> ForecastRecordOut:
    """The forecast's own record: each closed month's forecast (made at its start, or
    backtested before the record began) against what the month cost, newest first."""
    with db.read() as session:
        return record.record_of(session, name, months)


@router.post("/plan", response_model=PlanOut)
def post_plan(body: PlanIn) -> PlanOut:
    """The same arithmetic from numbers given directly, for teams with no recorded runs."""
    return plan_service.plan(body)
