"""Alert rules per pipeline (admin writes), their state, deliveries and evaluation."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Response, status

from app.alerts import service
from app.alerts.schemas import (
    AlertRuleIn,
    AlertRuleList,
    AlertRuleOut,
    DeliveryList,
    EvaluationOut,
)
from app.auth.service import TokenInfo
from app.deps import AdminPipeline, DatabaseDep, MaybeToken, ReadablePipeline, SettingsDep
from app.pipelines.service import get_by_name

router = APIRouter(prefix="/api/v1/pipelines/{name}/alerts", tags=["alerts"])
RuleId = Annotated[int, Path(ge=1, le=2**31 - 1, description="The rule's id")]


def is_admin_of(token: TokenInfo | None, pipeline: str) -> bool:
    """Whether the caller may see webhook URLs and delivery errors in full."""
    if token is None or "admin" not in token.scopes:
        return False
    return token.pipelines is None or pipeline in token.pipelines


@router.get("", response_model=AlertRuleList)
def list_alerts(name: ReadablePipeline, db: DatabaseDep, token: MaybeToken) -> AlertRuleList:
    """The pipeline's alert rules with their state (firing, since, last value). Webhook
    URLs in full for an admin token, else scheme and host only."""
    admin = is_admin_of(token, name)
    with db.read() as session:
        pipeline = get_by_name(session, name)
        found = service.list_rules(session, pipeline, admin=admin)
        return AlertRuleList(pipeline=pipeline.name, rules=found)


@router.post("", response_model=AlertRuleOut, status_code=status.HTTP_201_CREATED)
def create_alert(
    rule: AlertRuleIn, name: AdminPipeline, db: DatabaseDep, settings: SettingsDep
) -> AlertRuleOut:
    """Add one rule (admin). It is evaluated after the pipeline's next ingest or by
    `POST .../alerts/evaluate`; a webhook is queued only when its state changes.
    Loopback, private and link-local targets are refused unless listed in
    `CADENCE_WEBHOOK_ALLOWED_HOSTS`."""
    allowed = settings.webhook_allowed
    with db.write() as session:
        created = service.create_rule(session, get_by_name(session, name), rule, allowed)
    service.forget_rule_index(db)  # after the commit: ingests here see the rule at once
    return created


@router.delete("/{rule_id}", status_code=status.HTTP_204_NO_CONTENT)
def delete_alert(rule_id: RuleId, name: AdminPipeline, db: DatabaseDep) -> Response:
    """Delete one rule and its delivery history (admin)."""
    with db.write() as session:
        service.delete_rule(session, get_by_name(session, name), rule_id)
    service.forget_rule_index(db)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get("/deliveries", response_model=DeliveryList)
def list_deliveries(
    name: ReadablePipeline,
    db: DatabaseDep,
    token: MaybeToken,
    limit: Annotated[int, Query(ge=1, le=service.MAX_DELIVERIES)] = 50,
    before: Annotated[int | None, Query(ge=1, le=2**63 - 1, description="ids below")] = None,
) -> DeliveryList:
    """Webhook deliveries (queued, retrying and done), newest first; page with
    `before=<smallest id seen>`. The receiver's answers are shown to admin tokens."""
    admin = is_admin_of(token, name)
    with db.read() as session:
        pipeline = get_by_name(session, name)
        found = service.deliveries(session, pipeline, limit=limit + 1, before=before, admin=admin)
        return DeliveryList(
            pipeline=pipeline.name,
            deliveries=found[:limit],
            total=service.delivery_count(session, pipeline),
            next_before=found[limit - 1].id if len(found) > limit else None,
        )


@router.post("/evaluate", response_model=EvaluationOut)
def evaluate_alerts(name: AdminPipeline, db: DatabaseDep, settings: SettingsDep) -> EvaluationOut:
    """Evaluate the rules now (admin), e.g. after changing the budget with PUT; queues
    a webhook for each rule whose state changed (the sender posts it)."""
    ids = set(service.evaluate(db, settings, name))
    with db.read_latest() as session:
        pipeline = get_by_name(session, name)
        recent = service.deliveries(session, pipeline, limit=service.MAX_DELIVERIES, admin=True)
        return EvaluationOut(
            pipeline=pipeline.name,
            rules=service.list_rules(session, pipeline, admin=True),
            deliveries=[d for d in recent if d.id in ids],
        )
