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
from app.deps import AdminPipeline, DatabaseDep, ReadablePipeline, SettingsDep
from app.pipelines.service import get_by_name

router = APIRouter(prefix="/api/v1/pipelines/{name}/alerts", tags=["alerts"])
RuleId = Annotated[int, Path(ge=1, le=2**31 - 1, description="The rule's id")]


@router.get("", response_model=AlertRuleList)
def list_alerts(name: ReadablePipeline, db: DatabaseDep) -> AlertRuleList:
    """The pipeline's alert rules with their state (firing, since, last value)."""
    with db.transaction(write=False) as session:
        pipeline = get_by_name(session, name)
        return AlertRuleList(pipeline=pipeline.name, rules=service.list_rules(session, pipeline))


@router.post("", response_model=AlertRuleOut, status_code=status.HTTP_201_CREATED)
def create_alert(rule: AlertRuleIn, name: AdminPipeline, db: DatabaseDep) -> AlertRuleOut:
    """Add one rule (admin). It is evaluated after the pipeline's next ingest or by
    `POST .../alerts/evaluate`; a webhook is sent only when its state changes."""
    with db.transaction() as session:
        created = service.create_rule(session, get_by_name(session, name), rule)
    service.forget_rule_index(db)  # after the commit: ingests here see the rule at once
    return created


@router.delete("/{rule_id}", status_code=status.HTTP_204_NO_CONTENT)
def delete_alert(rule_id: RuleId, name: AdminPipeline, db: DatabaseDep) -> Response:
    """Delete one rule and its delivery history (admin)."""
    with db.transaction() as session:
        service.delete_rule(session, get_by_name(session, name), rule_id)
    service.forget_rule_index(db)
    return Response(status_code=status.HTTP_204_NO_CONTENT)


@router.get("/deliveries", response_model=DeliveryList)
def list_deliveries(
    name: ReadablePipeline,
    db: DatabaseDep,
    limit: Annotated[int, Query(ge=1, le=service.MAX_DELIVERIES)] = 50,
    before: Annotated[int | None, Query(ge=1, le=2**63 - 1, description="ids below")] = None,
) -> DeliveryList:
    """Webhook deliveries, newest first; page with `before=<smallest id seen>`."""
    with db.transaction(write=False) as session:
        pipeline = get_by_name(session, name)
        found = service.deliveries(session, pipeline, limit=limit + 1, before=before)
        return DeliveryList(
            pipeline=pipeline.name,
            deliveries=found[:limit],
            total=service.delivery_count(session, pipeline),
            next_before=found[limit - 1].id if len(found) > limit else None,
        )


@router.post("/evaluate", response_model=EvaluationOut)
def evaluate_alerts(name: AdminPipeline, db: DatabaseDep, settings: SettingsDep) -> EvaluationOut:
    """Evaluate the rules now (admin), e.g. after changing the budget with PUT; sends
    and records a webhook for each rule whose state changed."""
    ids = set(service.evaluate(db, settings, name))
    with db.transaction(write=False, primary=True) as session:
        pipeline = get_by_name(session, name)
        recent = service.deliveries(session, pipeline, limit=max(len(ids), 1))
        return EvaluationOut(
            pipeline=pipeline.name,
            rules=service.list_rules(session, pipeline),
            deliveries=[d for d in recent if d.id in ids],
        )
