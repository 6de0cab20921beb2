"""The weekly digest alert: on Monday (UTC), the week that ended for one pipeline, as the
weekly review says it (its one-line summary and top actions), through the outbox."""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy.orm import Session

from app.alerts import repository, rules
from app.db.engine import WriteSession
from app.db.models import AlertRule, Pipeline
from app.planning.weekly import iso_week, last_complete_week
from app.review.lines import week_in_one_line
from app.review.service import load_review, top_actions


def content(
    session: Session, pipeline: Pipeline, rule_id: int, now: datetime, event: str
) -> dict[str, object]:
    """The digest of the last complete ISO week before ``now``, as a webhook payload."""
    monday = last_complete_week(now.date())
    data = load_review(session, [pipeline.name], monday, None)
    [line] = data.lines
    actions = top_actions(session, [line])
    return rules.digest_payload(
        pipeline=pipeline.name,
        rule_id=rule_id,
        week=iso_week(monday),
        sentence=week_in_one_line(line, iso_week(monday - timedelta(weeks=1))),
        actions=[(a.label, a.remedy, a.saving_usd_per_month) for a in actions],
        at=now.isoformat(),
        event=event,
    )


def send_due(
    session: WriteSession, pipeline: Pipeline, digests: list[AlertRule], now: datetime
) -> list[int]:
    """Queue the digest of each rule not yet sent for the last complete week (rules
    locked by the caller); the ids queued. The content is read once for them all."""
    monday = last_complete_week(now.date())
    due = [r for r in digests if rules.digest_due(r.last_value, monday)]
    if not due:
        return []
    ids = []
    for rule in due:
        payload = content(session, pipeline, rule.id, now, "digest")
        ids.append(repository.enqueue_now(session, rule.id, "digest", payload, now=now).id)
        rule.last_value = float(monday.toordinal())
        rule.since = now
    return ids


def first_week(now: datetime) -> float:
    """A new digest rule's starting point: the week that just ended counts as sent, so the
    first digest goes out next Monday (a test send shows one at once)."""
    return float(last_complete_week(now.date()).toordinal())
