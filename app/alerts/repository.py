"""Alert rule and delivery queries."""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from app.db.engine import WriteSession
from app.db.models import AlertDelivery, AlertRule, Pipeline, Run


def rules_of(session: Session, pipeline_id: int) -> list[AlertRule]:
    stmt = select(AlertRule).where(AlertRule.pipeline_id == pipeline_id).order_by(AlertRule.id)
    return list(session.scalars(stmt))


def count_rules(session: Session, pipeline_id: int) -> int:
    stmt = select(func.count()).select_from(AlertRule).where(AlertRule.pipeline_id == pipeline_id)
    return session.scalar(stmt) or 0


def delete_rule(session: WriteSession, pipeline_id: int, rule_id: int) -> bool:
    """Delete one rule of the pipeline; False when it has no such rule."""
    gone = session.execute(
        delete(AlertRule).where(AlertRule.id == rule_id, AlertRule.pipeline_id == pipeline_id)
    )
    return bool(gone.rowcount)  # type: ignore[attr-defined]


def lock_enabled_rules(session: WriteSession, pipeline_id: int) -> list[AlertRule]:
    """The pipeline's enabled rules, locked ``FOR UPDATE`` on PostgreSQL (SQLite's write
    lock does the same), so two evaluations cannot both announce one change."""
    stmt = (
        select(AlertRule)
        .where(AlertRule.pipeline_id == pipeline_id, AlertRule.enabled.is_(True))
        .order_by(AlertRule.id)
        .with_for_update()
    )
    return list(session.scalars(stmt))


def deliveries(
    session: Session, pipeline_id: int, *, limit: int, before: int | None
) -> list[tuple[AlertDelivery, str]]:
    """Deliveries of the pipeline's rules with the rule's kind, newest first."""
    stmt = (
        select(AlertDelivery, AlertRule.kind)
        .join(AlertRule, AlertRule.id == AlertDelivery.rule_id)
        .where(AlertRule.pipeline_id == pipeline_id)
        .order_by(AlertDelivery.id.desc())
        .limit(limit)
    )
    if before is not None:
        stmt = stmt.where(AlertDelivery.id < before)
    return [(d, kind) for d, kind in session.execute(stmt)]


def latest_run_utilization(session: Session, pipeline_id: int) -> tuple[str, float] | None:
    """(run_id, GPU utilization) of the pipeline's latest run."""
    row: Any = session.execute(
        select(Run.run_id, Run.gpu_utilization)
        .where(Run.pipeline_id == pipeline_id)
        .order_by(Run.started_at.desc(), Run.id.desc())
        .limit(1)
    ).first()
    return None if row is None else (row[0], row[1])


def pipelines_with_enabled_rules(session: Session) -> frozenset[str]:
    return frozenset(
        session.scalars(
            select(Pipeline.name)
            .join(AlertRule, AlertRule.pipeline_id == Pipeline.id)
            .where(AlertRule.enabled.is_(True))
            .distinct()
        )
    )
