"""What an admin does to alert rules, from the browser or the API: add, pause, resume,
delete and send a test, each recorded in the pipeline's audit trail (``pipeline_change``,
field ``alert_rule``) with who did it."""

from __future__ import annotations

from datetime import UTC, datetime

from app.alerts import digest, repository, service
from app.alerts.rules import AlertKind, chat_escape
from app.alerts.schemas import AlertRuleIn, AlertRuleOut
from app.db.engine import WriteSession
from app.db.models import AlertRule, Pipeline
from app.exceptions import NotFound
from app.pipelines.changes import record

AUDIT_FIELD = "alert_rule"
THRESHOLD_WORDS = {
    AlertKind.COST_OVER_BUDGET: "{:g}% of the budget",
    AlertKind.GOODPUT_DROP: "a drop of {:g} points",
    AlertKind.UTILIZATION_FLOOR: "utilization below {:.0%}",
    AlertKind.WEEKLY_DIGEST: "every Monday",
}


def summary(rule_id: int, kind: str, threshold: float, enabled: bool = True) -> str:
    """``#3 utilization floor at utilization below 40%`` (paused ones say so)."""
    words = THRESHOLD_WORDS.get(AlertKind(kind), "{:g}").format(threshold)
    joint = ", " if kind == AlertKind.WEEKLY_DIGEST else " at "
    return f"#{rule_id} {kind.replace('_', ' ')}{joint}{words}" + ("" if enabled else " (paused)")


def create(
    session: WriteSession,
    pipeline: Pipeline,
    rule: AlertRuleIn,
    allowed_hosts: frozenset[str],
    who: str,
) -> AlertRuleOut:
    created = service.create_rule(session, pipeline, rule, allowed_hosts)
    new = summary(created.id, created.kind, created.threshold, created.enabled)
    record(session, pipeline.id, who, AUDIT_FIELD, None, new)
    return created


def _rule(session: WriteSession, pipeline: Pipeline, rule_id: int) -> AlertRule:
    found = repository.rule_of(session, pipeline.id, rule_id)
    if found is None:
        raise NotFound(f"pipeline {pipeline.name!r} has no alert rule {rule_id}")
    return found


def set_enabled(
    session: WriteSession, pipeline: Pipeline, rule_id: int, enabled: bool, who: str
) -> None:
    """Pause or resume a rule. A resumed rule is judged again at the next sweep (its last
    evaluation is forgotten), so a state that changed while it was paused is announced."""
    rule = _rule(session, pipeline, rule_id)
    if rule.enabled == enabled:
        return
    old = summary(rule.id, rule.kind, rule.threshold, rule.enabled)
    rule.enabled = enabled
    if enabled:
        rule.evaluated_changes = None
    record(
        session,
        pipeline.id,
        who,
        AUDIT_FIELD,
        old,
        summary(rule.id, rule.kind, rule.threshold, enabled),
    )


def delete(session: WriteSession, pipeline: Pipeline, rule_id: int, who: str) -> None:
    rule = _rule(session, pipeline, rule_id)
    old = summary(rule.id, rule.kind, rule.threshold, rule.enabled)
    service.delete_rule(session, pipeline, rule_id)
    record(session, pipeline.id, who, AUDIT_FIELD, old, None)


def send_test(session: WriteSession, pipeline: Pipeline, rule_id: int, who: str) -> int:
    """Queue a test webhook of the rule (sent like any other, retried the same way); its
    id. It is not a state change: it never cancels or delays one. Wake the sender
    (``app.alerts.sender.WAKE``) after the commit."""
    rule = _rule(session, pipeline, rule_id)
    now = datetime.now(UTC)
    if rule.kind == AlertKind.WEEKLY_DIGEST:  # the real content, marked as a test
        payload = digest.content(session, pipeline, rule.id, now, repository.TEST_EVENT)
        return repository.enqueue_now(session, rule.id, repository.TEST_EVENT, payload, now=now).id
    text = (
        f"[Cadence] {chat_escape(pipeline.name)}: test of alert rule "
        f"{summary(rule.id, rule.kind, rule.threshold)}, sent by {chat_escape(who)}"
    )
    payload = {
        "text": text,
        "pipeline": pipeline.name,
        "rule_id": rule.id,
        "kind": rule.kind,
        "event": repository.TEST_EVENT,
        "url": f"/pipelines/{pipeline.name}#alerts",
        "evaluated_at": now.isoformat(),
    }
    return repository.enqueue_now(session, rule.id, repository.TEST_EVENT, payload, now=now).id
