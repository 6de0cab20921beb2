"""GET /api/v1/pipelines/{name}/cadence. Scenario parameters are parsed as the other
planning endpoints parse them (app/analytics/router.py), so one scenario object can
replace them all."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from app.analytics.router import MonthConvention, Price, Variant
from app.cadence import service
from app.cadence.schemas import CadenceOut
from app.deps import DatabaseDep, ReadablePipeline
from app.planning.whatif import WhatIf

router = APIRouter(prefix="/api/v1", tags=["planning"])


@router.get("/pipelines/{name}/cadence", response_model=CadenceOut)
def get_cadence(
    name: ReadablePipeline,
    db: DatabaseDep,
    variant: Variant = None,
    price: Price = None,
    utilization_target: Annotated[float | None, Query(ge=0.01, le=1)] = None,
    workers: Annotated[int | None, Query(ge=1, le=100_000)] = None,
    failure_rate: Annotated[float | None, Query(ge=0, le=0.1)] = None,
    budget: Annotated[float | None, Query(ge=0, le=1e12)] = None,
    weeks_per_month: MonthConvention = "calendar",
) -> CadenceOut:
    """The cost-optimal retraining cadence: retraining spend plus the value lost to a
    stale model, over cadences from monthly to daily (DOMAIN.md §8)."""
    what_if = WhatIf(
        price=price,
        utilization_target=utilization_target,
        workers=workers,
        failure_rate_per_instance_hour=failure_rate,
    )
    scenario = service.Scenario(what_if, weeks_per_month, budget, variant)
    with db.transaction(write=False) as session:
        return service.cadence(session, name, scenario)
