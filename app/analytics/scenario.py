"""The scenario parser shared by the planning API and the pages (one parse per request).

``ScenarioDep`` reads the same query parameters everywhere (``cadence``, ``price``,
``utilization_target``, ``workers``, ``failure_rate``, ``checkpoint_interval_hours``,
``weeks_per_month``, ``budget``), so ``/gate?price=3`` and ``/pipelines/x?price=3`` mean
the same scenario, and every figure computed from it agrees.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import Depends, Query

from app.errors import Invalid
from app.planning.model import PlanningError
from app.planning.scenario import Scenario


def parse_scenario(
    cadence: Annotated[
        float | None, Query(ge=0.01, le=100, description="Target runs per week")
    ] = None,
    price: Annotated[float | None, Query(ge=0, le=10_000, description="USD per GPU-hour")] = None,
    utilization_target: Annotated[float | None, Query(ge=0.01, le=1)] = None,
    workers: Annotated[int | None, Query(ge=1, le=100_000)] = None,
    failure_rate: Annotated[
        float | None, Query(ge=0, le=0.1, description="Failures per instance-hour")
    ] = None,
    checkpoint_interval_hours: Annotated[float | None, Query(ge=0.01, le=1000)] = None,
    weeks_per_month: Annotated[
        Literal["calendar", "four_week"],
        Query(description="calendar = 52/12 weeks per month; four_week = 4"),
    ] = "calendar",
    budget: Annotated[
        float | None, Query(ge=0, le=1e12, description="USD per month (default: pipeline's)")
    ] = None,
) -> Scenario:
    """The scenario of one request; a 422 naming the field when it is not usable."""
    try:
        return Scenario(
            cadence=cadence, price=price, utilization_target=utilization_target,
            workers=workers, failure_rate=failure_rate,
            checkpoint_interval_hours=checkpoint_interval_hours,
            convention=weeks_per_month, budget=budget,
        )  # fmt: skip
    except PlanningError as exc:
        raise Invalid(str(exc), fields=[{"field": "scenario", "reason": str(exc)}]) from exc


ScenarioDep = Annotated[Scenario, Depends(parse_scenario)]
