"""The alert outbox in SQL: queue a notification with the rule's state change, claim due
ones for sending, record each attempt.

Claims are leases: a sender marks rows ``claimed_until`` and sends after its claim has
committed, so no transaction is open during an HTTP call. On PostgreSQL the claim
selects ``FOR UPDATE SKIP LOCKED``, so concurrent senders (workers, replicas) take
disjoint rows without waiting; on SQLite the write transaction (``BEGIN IMMEDIATE``)
serialises claims. The update is conditional on the row being unclaimed either way.
A sender that dies mid-send leaves a lease that expires; the row is then sent again.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, func, or_, select, update
from sqlalchemy.orm import Session

from app.alerts import schedule
from app.alerts.delivery import Attempt
from app.db.engine import WriteSession
from app.db.models import AlertDelivery, AlertRule, Pipeline, Run, RunVariant

OPEN = ("pending", "retrying")
# Events of a rule's state; an admin's "send a test" (app.alerts.admin) and the weekly
# digest (app.alerts.digest) are delivered like them but outside the state machine, so
# they never cancel or delay a firing/resolved notification.
STATE_EVENTS = ("firing", "resolved")
TEST_EVENT = "test"


def _unclaimed(now: datetime) -> Any:
    return or_(AlertDelivery.claimed_until.is_(None), AlertDelivery.claimed_until < now)


def enqueue(
    session: WriteSession,
    rule_id: int,
    event: str,
    payload: dict[str, Any],
    *,
    now: datetime,
    min_interval: float,
) -> AlertDelivery:
    """Queue a notification of a rule's new state, in the caller's transaction (the one
    that changed the state; the rule row is locked by it).

    States alternate, so a notification of the rule that still waits (for the interval
    or a retry, and is not being sent) announces the opposite of ``event``: the rule is
    back where the receiver last heard it was, and the waiting one is cancelled instead
    (``superseded``). Otherwise a new one is queued for ``schedule.first_due``.
    """
    waiting = session.scalar(
        select(AlertDelivery)
        .where(
            AlertDelivery.rule_id == rule_id,
            AlertDelivery.status.in_(OPEN),
            AlertDelivery.event.in_(STATE_EVENTS),  # a test or digest is no state to cancel
        )
        .order_by(AlertDelivery.id.desc())
        .limit(1)
    )
    if waiting is not None and waiting.event != event:
        cancelled = session.execute(
            update(AlertDelivery)
            .where(AlertDelivery.id == waiting.id, _unclaimed(now))  # not while it is sent
            .values(status="superseded", next_attempt_at=None)
            .execution_options(synchronize_session=False)
        )
        if cancelled.rowcount:  # type: ignore[attr-defined]
            session.refresh(waiting)
            return waiting
    last = session.scalar(
        select(func.max(AlertDelivery.scheduled_at)).where(
            AlertDelivery.rule_id == rule_id,
            AlertDelivery.status != "superseded",
            AlertDelivery.event.in_(STATE_EVENTS),
        )
    )
    due = schedule.first_due(now, last, min_interval)
    return _queued(session, rule_id, event, payload, due)


@dataclass(frozen=True)
class Claimed:
    id: int
    url: str
    payload: dict[str, Any]
    attempts: int
    scheduled_at: datetime
    error: str | None


def any_due(session: Session, *, now: datetime) -> bool:
    """Whether anything is due: a read, so an idle sender never takes a write lock."""
    found = session.scalar(
        select(AlertDelivery.id)
        .where(AlertDelivery.next_attempt_at <= now, _unclaimed(now))
        .limit(1)
    )
    return found is not None


def claim_due(
    session: WriteSession, *, now: datetime, limit: int, lease: timedelta, token: str
) -> list[Claimed]:
    """Claim up to ``limit`` notifications due at ``now`` for ``lease``, oldest first."""
    ids = list(
        session.scalars(
            select(AlertDelivery.id)
            .where(AlertDelivery.next_attempt_at <= now, _unclaimed(now))
            .order_by(AlertDelivery.next_attempt_at, AlertDelivery.id)
            .limit(limit)
            .with_for_update(skip_locked=True)  # SQLite: nothing (its write lock serialises)
        )
    )
    if not ids:
        return []
    session.execute(
        update(AlertDelivery)
        .where(AlertDelivery.id.in_(ids), _unclaimed(now))
        .values(claimed_until=now + lease, claim_token=token)
        .execution_options(synchronize_session=False)
    )
    rows = session.execute(
        select(AlertDelivery, AlertRule.webhook_url)
        .join(AlertRule, AlertRule.id == AlertDelivery.rule_id)
        .where(AlertDelivery.id.in_(ids), AlertDelivery.claim_token == token)
        .order_by(AlertDelivery.next_attempt_at, AlertDelivery.id)
    )
    return [Claimed(d.id, url, d.payload, d.attempts, d.scheduled_at, d.error) for d, url in rows]


def record_attempt(
    session: WriteSession,
    claimed: Claimed,
    result: Attempt,
    *,
    now: datetime,
    token: str,
    retry_base: float,
) -> str:
    """Store one attempt's outcome and release the claim; the row's new status."""
    attempts = claimed.attempts + 1
    retry_at = None
    if result.outcome == "retry":
        retry_at = schedule.next_attempt(claimed.scheduled_at, now, attempts, retry_base)
    status = "delivered" if result.outcome == "delivered" else "retrying" if retry_at else "failed"
    error = claimed.error
    if result.error:  # one line per failed attempt; the last ~2000 characters are kept
        error = (f"{error}\n" if error else "") + f"attempt {attempts}: {result.error}"
        error = error[-2000:]
    session.execute(
        update(AlertDelivery)
        .where(AlertDelivery.id == claimed.id, AlertDelivery.claim_token == token)
        .values(
            status=status,
            attempts=attempts,
            response_status=result.response_status,
            error=error,
            last_attempt_at=now,
            next_attempt_at=retry_at,
            claimed_until=None,
            claim_token=None,
        )
        .execution_options(synchronize_session=False)
    )
    return status


def outbox_counts(session: Session, pipeline_id: int) -> dict[str, int]:
    """Notifications of a pipeline's rules by status (for the pipeline page)."""
    rows = session.execute(
        select(AlertDelivery.status, func.count())
        .join(AlertRule, AlertRule.id == AlertDelivery.rule_id)
        .where(AlertRule.pipeline_id == pipeline_id)
        .group_by(AlertDelivery.status)
    )
    return {status: int(n) for status, n in rows}


# --- rules ---------------------------------------------------------------------------


def delivery_counts(session: Session) -> dict[str, int]:
    """Stored notifications by status, every pipeline (for /metrics)."""
    rows = session.execute(
        select(AlertDelivery.status, func.count()).group_by(AlertDelivery.status)
    )
    return {str(status): int(n) for status, n in rows}


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


def delivery_count(session: Session, pipeline_id: int) -> int:
    """Deliveries of the pipeline's rules, every status."""
    stmt = (
        select(func.count())
        .select_from(AlertDelivery)
        .join(AlertRule, AlertRule.id == AlertDelivery.rule_id)
        .where(AlertRule.pipeline_id == pipeline_id)
    )
    return int(session.scalar(stmt) or 0)


def latest_run_utilization(session: Session, pipeline_id: int) -> tuple[str, float] | None:
    """(run_id, GPU utilization) of the pipeline's latest run."""
    row: Any = session.execute(
        select(Run.run_id, Run.gpu_utilization)
        .where(Run.pipeline_id == pipeline_id, Run.gpu_utilization.is_not(None))
        .order_by(Run.started_at.desc(), Run.id.desc())
        .limit(1)
    ).first()
    return None if row is None else (row[0], row[1])


def unjudged_pipelines(session: Session, *, evaluated_before: datetime) -> list[str]:
    """Pipelines with an enabled rule that has not judged every run write: its pipeline's
    run change count (the sum of its ``run_variant`` change counters, moved by each run
    insert or delete in that write's own transaction) differs from what the rule's last
    evaluation saw, or the rule has not been evaluated since ``evaluated_before``."""
    ruled = select(AlertRule.pipeline_id).where(AlertRule.enabled.is_(True))
    change_count = (
        select(RunVariant.pipeline_id, func.sum(RunVariant.changes).label("changes"))
        .where(RunVariant.pipeline_id.in_(ruled))
        .group_by(RunVariant.pipeline_id)
        .subquery()
    )
    stmt = (
        select(Pipeline.name)
        .join(AlertRule, AlertRule.pipeline_id == Pipeline.id)
        .join(change_count, change_count.c.pipeline_id == Pipeline.id)
        .where(
            AlertRule.enabled.is_(True),
            or_(
                AlertRule.evaluated_changes.is_(None),
                AlertRule.evaluated_changes != change_count.c.changes,
                AlertRule.last_evaluated_at.is_(None),
                AlertRule.last_evaluated_at < evaluated_before,
            ),
        )
        .distinct()
        .order_by(Pipeline.name)
    )
    return list(session.scalars(stmt))


def rule_of(session: WriteSession, pipeline_id: int, rule_id: int) -> AlertRule | None:
    """One rule of the pipeline, locked for the caller's change."""
    return session.scalar(
        select(AlertRule)
        .where(AlertRule.id == rule_id, AlertRule.pipeline_id == pipeline_id)
        .with_for_update()
    )


def enqueue_now(
    session: WriteSession, rule_id: int, event: str, payload: dict[str, Any], *, now: datetime
) -> AlertDelivery:
    """Queue a notification that is not a state change (a test, a weekly digest), due now."""
    return _queued(session, rule_id, event, payload, now)


def _queued(
    session: WriteSession, rule_id: int, event: str, payload: dict[str, Any], due: datetime
) -> AlertDelivery:
    row = AlertDelivery(
        rule_id=rule_id,
        event=event,
        payload=payload,
        status="pending",
        attempts=0,
        scheduled_at=due,
        next_attempt_at=due,
    )
    session.add(row)
    session.flush()
    return row


def pipelines_with_enabled_rules(session: Session) -> frozenset[str]:
    return frozenset(
        session.scalars(
            select(Pipeline.name)
            .join(AlertRule, AlertRule.pipeline_id == Pipeline.id)
            .where(AlertRule.enabled.is_(True))
            .distinct()
        )
    )
