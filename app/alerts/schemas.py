"""Alert rules and deliveries on the API."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import Field

from app.alerts.rules import AlertKind
from app.schemas_common import OutModel, StrictModel


class AlertRuleIn(StrictModel):
    # Not strict: a JSON body names the kind as text ("cost_over_budget"), which strict
    # validation of the dict FastAPI parses would refuse as "not an AlertKind".
    kind: AlertKind = Field(
        strict=False,
        description="cost_over_budget: the bill at risk at the current cadence (the "
        "(1 - CADENCE_RISK_TOLERANCE) quantile of the month's bill, the p90 at 10%) vs the "
        "budget, so at 100 it fires exactly when the pages say the month does not fit; "
        "goodput_drop: latest ISO week vs the previous one; utilization_floor: "
        "the latest run's GPU utilization; weekly_digest: every Monday (UTC), the week that "
        "ended as the weekly review says it, with the top actions.",
    )
    threshold: float = Field(
        description="cost_over_budget: percent of the budget (100 = at budget); "
        "goodput_drop: points (10 = 10 percentage points); utilization_floor: a fraction "
        "(0.4); weekly_digest: 0."
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
    webhook_url: str = Field(
        description="The full URL for admin tokens; scheme and host only for readers."
    )
    webhook_url_masked: bool
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
    status: str = Field(
        description="pending | retrying | delivered | failed (gave up) | superseded (the "
        "rule changed again before it was sent; the later state was sent instead)"
    )
    attempts: int
    response_status: int | None = Field(description="The receiver's HTTP status (admins).")
    error: str | None = Field(
        description="One line per failed attempt (admins; readers see that it failed)"
    )
    payload: dict[str, Any]
    created_at: datetime
    scheduled_at: datetime = Field(description="When it could first be sent.")
    next_attempt_at: datetime | None = Field(description="The next try, while not final.")
    last_attempt_at: datetime | None


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
