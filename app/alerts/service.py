"""Alert rules: storage, evaluation, and what readers and admins see of them.

Evaluation reads a pipeline's metrics, applies the pure rules of ``app.alerts.rules``
and updates each rule's state in one transaction (rules locked ``FOR UPDATE`` on
PostgreSQL, SQLite's write lock otherwise, so two evaluations cannot both announce the
same change). The same transaction queues each notification in the outbox
(``alert_delivery``, ``app.alerts.repository``); the sender (``app.alerts.sender``)
POSTs it later, outside any request.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from functools import partial

from sqlalchemy.orm import Session

from app.alerts import digest, repository, rules, targets
from app.alerts.rules import AlertKind
from app.alerts.schemas import AlertRuleIn, AlertRuleOut, DeliveryOut
from app.alerts.sender import WAKE
from app.analytics.bill_now import current_bill_at_risk
from app.analytics.month import months
from app.analytics.weekly import latest_weeks_goodput
from app.db.engine import Database, WriteSession, status_thresholds_of
from app.db.kept import KeptMap
from app.db.models import AlertDelivery, AlertRule, Pipeline
from app.db.rollup_reads import change_counts
from app.exceptions import Invalid, NotFound
from app.pipelines.service import get_by_name
from app.planning.weekly import iso_week
from app.settings import Settings

log = logging.getLogger("cadence.alerts")

MAX_RULES_PER_PIPELINE = 50
MAX_DELIVERIES = 200


# --- rules -------------------------------------------------------------------------------


def validate(rule: AlertRuleIn, allowed_hosts: frozenset[str]) -> None:
    fields = []
    problem = rules.url_problem(rule.webhook_url)
    if problem is None:
        problem = targets.saved_target_problem(rule.webhook_url, allowed_hosts)
    if problem is not None:
        fields.append({"field": "webhook_url", "reason": problem})
    if (problem := rules.threshold_problem(rule.kind, rule.threshold)) is not None:
        fields.append({"field": "threshold", "reason": f"{rule.kind} threshold {problem}"})
    if fields:
        summary = "; ".join(f"{f['field']}: {f['reason']}" for f in fields)
        raise Invalid(f"invalid request: {summary}", fields=fields)


def rule_out(rule: AlertRule, pipeline: str, *, admin: bool = False) -> AlertRuleOut:
    """A rule as a reader sees it (the webhook as scheme and host), or an admin."""
    url = rule.webhook_url if admin else targets.masked(rule.webhook_url)
    return AlertRuleOut(
        id=rule.id,
        pipeline=pipeline,
        kind=rule.kind,
        threshold=rule.threshold,
        webhook_url=url,
        webhook_url_masked=not admin,
        enabled=rule.enabled,
        firing=rule.firing,
        since=rule.since,
        last_value=rule.last_value,
        last_evaluated_at=rule.last_evaluated_at,
        created_at=rule.created_at,
    )


def list_rules(session: Session, pipeline: Pipeline, *, admin: bool = False) -> list[AlertRuleOut]:
    rows = repository.rules_of(session, pipeline.id)
    return [rule_out(r, pipeline.name, admin=admin) for r in rows]


def create_rule(
    session: WriteSession, pipeline: Pipeline, rule: AlertRuleIn, allowed_hosts: frozenset[str]
) -> AlertRuleOut:
    validate(rule, allowed_hosts)
    if repository.count_rules(session, pipeline.id) >= MAX_RULES_PER_PIPELINE:
        raise Invalid(
            f"a pipeline holds at most {MAX_RULES_PER_PIPELINE} alert rules; delete one first",
            fields=[{"field": "body", "reason": "too many rules"}],
        )
    row = AlertRule(
        pipeline_id=pipeline.id,
        kind=rule.kind,
        threshold=rule.threshold,
        webhook_url=rule.webhook_url,
        enabled=rule.enabled,
        firing=False,
        last_value=digest.first_week(datetime.now(UTC))
        if rule.kind == AlertKind.WEEKLY_DIGEST
        else None,
    )
    session.add(row)
    session.flush()
    return rule_out(row, pipeline.name, admin=True)


def delete_rule(session: WriteSession, pipeline: Pipeline, rule_id: int) -> None:
    if not repository.delete_rule(session, pipeline.id, rule_id):
        raise NotFound(f"pipeline {pipeline.name!r} has no alert rule {rule_id}")


def deliveries(
    session: Session,
    pipeline: Pipeline,
    *,
    limit: int,
    before: int | None = None,
    admin: bool = False,
) -> list[DeliveryOut]:
    found = repository.deliveries(
        session,
        pipeline.id,
        limit=min(limit, MAX_DELIVERIES + 1),  # +1: the caller looks one past its page
        before=before,
    )
    return [_delivery_out(d, kind, admin) for d, kind in found]


def delivery_count(session: Session, pipeline: Pipeline) -> int:
    """Deliveries of the pipeline's rules, on every page."""
    return repository.delivery_count(session, pipeline.id)


READER_ERROR = "the webhook did not accept it (admins see the details)"


def _delivery_out(d: AlertDelivery, kind: str, admin: bool) -> DeliveryOut:
    """Admins see the receiver's answers; readers only whether it worked, since the
    error text would tell them which hosts and ports answer inside the network."""
    return DeliveryOut(
        id=d.id,
        rule_id=d.rule_id,
        kind=kind,
        event=d.event,
        status=d.status,
        attempts=d.attempts,
        response_status=d.response_status if admin else None,
        error=d.error if admin or d.error is None else READER_ERROR,
        payload=d.payload,
        created_at=d.created_at,
        scheduled_at=d.scheduled_at,
        next_attempt_at=d.next_attempt_at,
        last_attempt_at=d.last_attempt_at,
    )


# --- metrics -----------------------------------------------------------------------------


def read_metrics(session: Session, pipeline: Pipeline, kinds: Iterable[str]) -> rules.Metrics:
    """Only what the pipeline's rules need: a projection, two weeks of goodput, one run."""
    kinds = set(kinds)
    values: dict[str, object] = {}
    if AlertKind.COST_OVER_BUDGET in kinds and pipeline.monthly_budget_usd:
        found = current_bill_at_risk(session, pipeline)
        if found is not None:
            values["bill_at_risk_usd"], values["expected_bill_usd"] = found
            values["risk_tolerance"] = status_thresholds_of(session).risk_tolerance
        values["budget_usd"] = pipeline.monthly_budget_usd
    if AlertKind.BUDGET_LIKELY_OVER in kinds and pipeline.monthly_budget_usd:
        mtd = months(session, [pipeline]).get(pipeline.id)
        if mtd is not None and mtd.p_over_budget is not None:
            over = mtd.spend_to_date_usd > pipeline.monthly_budget_usd
            values["month_p_over"] = 1.0 if over else mtd.p_over_budget
            values["month_spent_usd"] = mtd.spend_to_date_usd
            values["month_expected_usd"] = mtd.expected_end_of_month_usd
            values["month_status"] = mtd.status.value if mtd.status else None
            values["budget_usd"] = pipeline.monthly_budget_usd
    if AlertKind.GOODPUT_DROP in kinds:
        values.update(_two_weeks(session, pipeline))
    if AlertKind.UTILIZATION_FLOOR in kinds:
        latest = repository.latest_run_utilization(session, pipeline.id)
        if latest is not None:
            values["latest_run_id"], values["latest_utilization"] = latest
    return rules.Metrics(**values)  # type: ignore[arg-type]


def _two_weeks(session: Session, pipeline: Pipeline) -> dict[str, object]:
    found = latest_weeks_goodput(session, pipeline)
    if found is None:
        return {}
    monday, weeks = found
    previous = monday - timedelta(weeks=1)
    return {
        "goodput_latest": weeks.get(monday),
        "goodput_previous": weeks.get(previous),
        "latest_week": iso_week(monday),
        "previous_week": iso_week(previous),
    }


# --- evaluation --------------------------------------------------------------------------


def apply(
    rows: list[AlertRule], metrics: rules.Metrics, pipeline: str, now: datetime
) -> list[rules.Notification]:
    """Update each rule's state from ``metrics``; the notifications for the changes."""
    notes = []
    for rule in rows:
        value = metrics.value(rule.kind)
        event = rules.transition(rule.firing, rules.is_firing(rule.kind, value, rule.threshold))
        rule.last_evaluated_at = now
        if value is not None:
            rule.last_value = value
        if event is None or value is None:
            continue
        rule.firing = event == "firing"
        rule.since = now
        body = rules.payload(
            pipeline=pipeline,
            rule_id=rule.id,
            kind=rule.kind,
            event=event,
            value=value,
            threshold=rule.threshold,
            metrics=metrics,
            at=now.isoformat(),
        )
        notes.append(rules.Notification(rule.id, event, body))
    return notes


def evaluate(
    db: Database,
    settings: Settings,
    name: str,
    *,
    now: datetime | None = None,
    unless_judged_since: datetime | None = None,
) -> list[int]:
    """Evaluate a pipeline's enabled rules; queue a webhook per state change, in the
    transaction that changes the state (so neither happens without the other).

    Each rule records the pipeline's run change count it judged (``evaluated_changes``),
    read after the rules are locked and before the metrics, so a run committed meanwhile
    leaves the rule visibly behind and the sweeper evaluates it again. With
    ``unless_judged_since`` (the sweeper's), rules that already judged the current
    change count since that moment are left alone: another process got there first.

    Returns the ids of the notifications queued or cancelled (empty: nothing changed).
    """
    now = now or datetime.now(UTC)
    with db.write() as session:
        pipeline = get_by_name(session, name)
        rows = repository.lock_enabled_rules(session, pipeline.id)
        if not rows:
            return []
        changes = change_counts(session, [pipeline.id]).get(pipeline.id)
        if unless_judged_since is not None and all(
            _judged(r, changes, unless_judged_since) for r in rows
        ):
            return []
        states = [r for r in rows if r.kind in rules.STATE_KINDS]
        metrics = read_metrics(session, pipeline, {r.kind for r in states})
        notes = apply(states, metrics, pipeline.name, now)
        digests = [r for r in rows if r.kind == AlertKind.WEEKLY_DIGEST]
        sent = digest.send_due(session, pipeline, digests, now) if digests else []
        for rule in rows:
            rule.evaluated_changes = changes
            rule.last_evaluated_at = now
        ids = sent + [
            repository.enqueue(
                session,
                n.rule_id,
                n.event,
                n.payload,
                now=now,
                min_interval=settings.alert_min_interval_seconds,
            ).id
            for n in notes
        ]
    if ids:
        WAKE.set()  # this process's sender looks at once
        log.info("alerts of %s: %s notification(s) queued", name, len(ids))
    return ids


def _judged(rule: AlertRule, changes: int | None, since: datetime) -> bool:
    evaluated = rule.last_evaluated_at
    return rule.evaluated_changes == changes and evaluated is not None and evaluated >= since


RULE_INDEX_SECONDS = 5.0
# The pipelines with enabled rules, kept for the RULE_INDEX_SECONDS period they were read in.
KEPT_RULES: KeptMap[str, frozenset[str]] = KeptMap("alert_rules")


def pipelines_with_rules(db: Database, names: Iterable[str]) -> list[str]:
    """Which of ``names`` have enabled rules, from a per-process index refreshed every
    RULE_INDEX_SECONDS (and at once when this process adds or removes a rule).

    Most ingests hit pipelines without rules; the index keeps them to no extra query
    and no background task. A rule added through another process applies within 5 s.
    """
    wanted = sorted(set(names))
    if not wanted:
        return []
    period = int(time.monotonic() // RULE_INDEX_SECONDS)
    indexed = KEPT_RULES.get_from(db.kept, ("index", period), partial(_rule_index, db))
    return [n for n in wanted if n in indexed]


def _rule_index(db: Database) -> frozenset[str]:
    with db.read_latest() as session:
        return frozenset(repository.pipelines_with_enabled_rules(session))


def forget_rule_index(db: Database) -> None:
    KEPT_RULES.forget(db.kept)


def evaluate_after_ingest(db: Database, settings: Settings, names: list[str]) -> None:
    """Background task after a successful ingest: never raises into the server. It is
    the fast path only: if it never runs (the process died) or fails, the runs it was
    for are still unjudged in the database, and the sweeper evaluates them."""
    try:
        for name in names:
            evaluate(db, settings, name)
    except Exception:
        log.exception("alert evaluation after ingest failed for %s", names)


# --- dashboard ---------------------------------------------------------------------------


def page_section(session: Session, pipeline: Pipeline, limit: int = 10) -> dict[str, object]:
    """Rules and deliveries as readers see them, and the outbox by status. Deliveries
    are of rules (a rule's are deleted with it): with no rule there is none to read."""
    rules = list_rules(session, pipeline)
    if not rules:
        return {"rules": rules, "deliveries": [], "outbox": {}}
    return {
        "rules": rules,
        "deliveries": deliveries(session, pipeline, limit=limit),
        "outbox": repository.outbox_counts(session, pipeline.id),
    }


def delivery_counts(session: Session) -> dict[str, int]:
    """Stored notifications by status across every pipeline (delivered, failed, ...)."""
    return repository.delivery_counts(session)
