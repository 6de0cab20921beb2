"""Alert rules and deliveries on the API."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from app.schemas_common import OutModel, StrictModel

KindField = Literal["cost_over_budget", "goodput_drop", "utilization_floor"]


class AlertRuleIn(StrictModel):
    kind: KindField = Field(
        description="cost_over_budget: projected monthly cost at the current cadence vs "
        "the budget; goodput_drop: latest ISO week vs the previous one; utilization_floor: "
        "the latest run's GPU utilization."
    )
    threshold: float = Field(
        description="cost_over_budget: percent of the budget (100 = at budget); "
        "goodput_drop: points (10 = 10 percentage points); utilization_floor: a fraction "
        "(0.4)."
    )
    webhook_url: str = Field(
        min_length=1, max_length=2000, description="http(s) URL that receives the JSON POST"
    )
    enabled: bool = True


class AlertRuleOut(OutModel):
    id: int
    pipeline: str
    kind: str
    threshold: float
    webhook_url: str
    enabled: bool
    firing: bool
    since: datetime | None
    last_value: float | None
    last_evaluated_at: datetime | None
    created_at: datetime


class AlertRuleList(OutModel):
    pipeline: str
    rules: list[AlertRuleOut]


class DeliveryOut(OutModel):
    id: int
    rule_id: int
    kind: str
    event: str
    status: str
    attempts: int
    response_status: int | None
    error: str | None
    payload: dict[str, Any]
    created_at: datetime


class DeliveryList(OutModel):
    pipeline: str
    deliveries: list[DeliveryOut]
    total: int = Field(description="Deliveries of this pipeline's rules, on every page.")
    next_before: int | None = Field(
        description="Pass as ?before= for the next (older) page; null on the last page."
    )


class EvaluationOut(OutModel):
    pipeline: str
    rules: list[AlertRuleOut]
    deliveries: list[DeliveryOut]
