"""Alert rules as pure functions: validation, firing, transitions and the message.

No database, no HTTP. Values per kind:

- ``cost_over_budget``: the bill at risk at the pipeline's current cadence (the (1 - risk
  tolerance) quantile of the month's bill, the p90 at the default 10%), as a percent of
  its monthly budget; fires when it is above ``threshold`` (percent, e.g. 100). At 100
  this is the one test of every budget word (P(bill > budget) against the tolerance,
  app/planning/budget_status.py): the alert fires exactly when the pages say "does not
  fit", never on the expected bill alone.
- ``goodput_drop``: the previous ISO week's overall goodput minus the latest week's, in
  points (0..100); fires when the drop is above ``threshold`` points.
- ``utilization_floor``: the latest run's GPU utilization (fraction); fires when it is
  below ``threshold`` (a fraction), resolves when a later run is at or above it.

A value of ``None`` (no budget, no runs, no previous week) changes nothing: a rule keeps
its state until there is something to compare.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import date
from enum import StrEnum
from typing import Any, Literal
from urllib.parse import urlsplit

from app.planning.budget_status import DEFAULT_RISK_TOLERANCE


class AlertKind(StrEnum):
    """What a rule watches; the API, the table's check constraint and the rules agree."""

    COST_OVER_BUDGET = "cost_over_budget"
    GOODPUT_DROP = "goodput_drop"
    UTILIZATION_FLOOR = "utilization_floor"
    # Not a condition: every Monday, the week that ended, as the review says it.
    WEEKLY_DIGEST = "weekly_digest"
    # This month's bill likely over the budget before the money is spent: the chance
    # (percent) that the end-of-month bill exceeds it (100 once spend has).
    BUDGET_LIKELY_OVER = "budget_likely_over"


# The kinds that fire and resolve (a state); the digest is sent on a schedule instead.
STATE_KINDS = frozenset(
    {
        AlertKind.COST_OVER_BUDGET,
        AlertKind.GOODPUT_DROP,
        AlertKind.UTILIZATION_FLOOR,
        AlertKind.BUDGET_LIKELY_OVER,
    }
)

Event = Literal["firing", "resolved"]

# Accepted thresholds per kind (exclusive low, inclusive high) and their unit.
THRESHOLD_RANGES: dict[str, tuple[float, float, str]] = {
    AlertKind.COST_OVER_BUDGET: (0.0, 10_000.0, "percent of the monthly budget, e.g. 100"),
    AlertKind.GOODPUT_DROP: (0.0, 100.0, "points of weekly goodput, e.g. 10"),
    AlertKind.UTILIZATION_FLOOR: (0.0, 1.0, "a utilization fraction, e.g. 0.4"),
    AlertKind.WEEKLY_DIGEST: (-1.0, 0.0, "0: a weekly digest has no threshold"),
    AlertKind.BUDGET_LIKELY_OVER: (0.0, 100.0, "percent chance the month ends over, e.g. 50"),
}
MAX_URL_LENGTH = 2000


def threshold_problem(kind: str, threshold: float) -> str | None:
    """Why ``threshold`` is not acceptable for ``kind``, or None."""
    if kind not in THRESHOLD_RANGES:
        return None  # the kind itself is refused elsewhere
    low, high, unit = THRESHOLD_RANGES[kind]
    if not math.isfinite(threshold):
        return "must be a finite number"
    if kind == AlertKind.WEEKLY_DIGEST:
        return None if threshold == 0 else f"must be 0 ({unit})"
    if low < threshold <= high:
        return None
    hint = ""
    if kind == AlertKind.UTILIZATION_FLOOR and 1 < threshold <= 100:
        hint = f"; {threshold:g} looks like a percentage: did you mean {threshold / 100:g}?"
    return f"must be above {low:g} and at most {high:g} ({unit}){hint}"


def url_problem(url: str) -> str | None:
    """Why ``url`` cannot be a webhook (http or https with a host only), or None."""
    if len(url) > MAX_URL_LENGTH:
        return f"at most {MAX_URL_LENGTH} characters"
    if any(ord(c) < 33 or ord(c) == 127 for c in url):
        return "must not contain spaces or control characters"
    try:
        parts = urlsplit(url)
        port = parts.port  # raises on a bad port
    except ValueError:
        return "not a valid URL"
    if parts.scheme not in ("http", "https"):
        return "must be an http:// or https:// URL"
    if not parts.hostname:
        return "must name a host, e.g. https://hooks.slack.com/services/..."
    if port == 0:
        return "not a valid port"
    return None


def is_firing(kind: str, value: float | None, threshold: float) -> bool | None:
    """Whether a rule's condition holds for ``value``; None when there is no value."""
    if value is None or not math.isfinite(value):
        return None
    if kind == AlertKind.UTILIZATION_FLOOR:
        return value < threshold
    if kind == AlertKind.BUDGET_LIKELY_OVER:
        return value >= threshold  # "likely over" at 50% means P >= 50%
    return value > threshold  # cost_over_budget (percent), goodput_drop (points)


def transition(was_firing: bool, now_firing: bool | None) -> Event | None:
    """Fire on change, not on every evaluation: the event to send, or None."""
    if now_firing is None or now_firing == was_firing:
        return None
    return "firing" if now_firing else "resolved"


@dataclass(frozen=True)
class Metrics:
    """What evaluation read for one pipeline (None: not known)."""

    # The bill the one test is about: the (1 - risk tolerance) quantile of the bill at the
    # current cadence (the p90 at 10%; app/planning/verdict.py), and the expected bill.
    bill_at_risk_usd: float | None = None
    expected_bill_usd: float | None = None
    risk_tolerance: float = DEFAULT_RISK_TOLERANCE
    budget_usd: float | None = None
    goodput_latest: float | None = None  # overall goodput 0..1
    goodput_previous: float | None = None
    latest_week: str | None = None  # ISO week labels
    previous_week: str | None = None
    latest_utilization: float | None = None
    latest_run_id: str | None = None
    month_p_over: float | None = None  # P(this month's bill > budget), 0..1
    month_spent_usd: float | None = None
    month_expected_usd: float | None = None
    month_status: str | None = None

    def value(self, kind: str) -> float | None:
        if kind == AlertKind.COST_OVER_BUDGET:
            cost, budget = self.bill_at_risk_usd, self.budget_usd
            if cost is None or budget is None or budget <= 0:
                return None
            return 100.0 * cost / budget
        if kind == AlertKind.GOODPUT_DROP:
            if self.goodput_latest is None or self.goodput_previous is None:
                return None
            return 100.0 * (self.goodput_previous - self.goodput_latest)
        if kind == AlertKind.UTILIZATION_FLOOR:
            return self.latest_utilization
        if kind == AlertKind.WEEKLY_DIGEST:
            return None  # no state: sent on a schedule (digest_due)
        if kind == AlertKind.BUDGET_LIKELY_OVER:
            return None if self.month_p_over is None else 100.0 * self.month_p_over
        raise ValueError(f"unknown alert kind {kind!r}")


def digest_due(last_sent: float | None, monday: date) -> bool:
    """Whether the digest of the ISO week starting ``monday`` (the last complete one) is
    still to send; ``last_sent`` is the Monday (as ``date.toordinal()``) of the last one
    sent. Once a week, whatever the number of evaluations or processes (the rule row is
    locked while this is decided)."""
    return last_sent is None or monday.toordinal() > last_sent


def digest_payload(
    *,
    pipeline: str,
    rule_id: int,
    week: str,
    sentence: str,
    actions: list[tuple[str, str, float]],
    at: str,
    event: str = "digest",
) -> dict[str, Any]:
    """The weekly digest: the review's week in one line and the top actions (label,
    remedy, saving per month if halved), Slack-compatible text plus the structured fields."""
    e = chat_escape
    lines = [f"[Cadence] {e(pipeline)}, week {e(week)}: {e(sentence)}"]
    lines += [
        f"{n}. {e(label)}: {e(remedy)} (halving it saves {_usd(saving)}/month)"
        for n, (label, remedy, saving) in enumerate(actions, start=1)
    ]
    return {
        "text": "\n".join(lines),
        "pipeline": pipeline,
        "rule_id": rule_id,
        "kind": AlertKind.WEEKLY_DIGEST.value,
        "event": event,
        "week": week,
        "summary": sentence,
        "actions": [{"label": a, "remedy": r, "saving_usd_per_month": s} for a, r, s in actions],
        "url": f"/review?week={week}",
        "evaluated_at": at,
    }


def _usd(value: float | None) -> str:
    return "–" if value is None else f"${value:,.0f}"


def chat_escape(text: object) -> str:
    """``text`` safe inside Slack-compatible message markup.

    Slack (and Mattermost, Rocket.Chat) read ``<!channel>``, ``<@U123>`` and
    ``<https://x|label>`` in a message's text as mentions and links; a pipeline token
    could otherwise ping a whole channel or disguise a link through a run id. Their
    documented escapes are exactly these three.
    """
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def describe(kind: str, value: float, threshold: float, metrics: Metrics) -> str:
    """The condition in words, e.g. "the p90 bill at the current cadence, $2,456 a month,
    is 175% of ..." (on the pipeline's cost basis);
    every value from the data is escaped for chat markup (:func:`chat_escape`)."""
    e = chat_escape
    if kind == AlertKind.COST_OVER_BUDGET:
        at_risk = f"p{100 * (1 - metrics.risk_tolerance):.0f}"
        verdict = "does not fit" if value > 100 else "fits"
        return (
            f"at the current cadence the expected bill is "
            f"{e(_usd(metrics.expected_bill_usd))} a month and the {at_risk} bill "
            f"{e(_usd(metrics.bill_at_risk_usd))}, {value:.0f}% of the "
            f"{e(_usd(metrics.budget_usd))} budget (threshold {threshold:g}%): the month "
            f"{verdict} the budget at a {metrics.risk_tolerance:.0%} risk tolerance"
        )
    if kind == AlertKind.GOODPUT_DROP:
        prev, last = metrics.goodput_previous or 0.0, metrics.goodput_latest or 0.0
        return (
            f"weekly goodput {e(metrics.previous_week)} {prev:.1%} -> {e(metrics.latest_week)} "
            f"{last:.1%}, a drop of {value:.1f} points (threshold {threshold:g} points)"
        )
    if kind == AlertKind.BUDGET_LIKELY_OVER:
        status = (metrics.month_status or "").replace("_", " ")
        return (
            f"this month is {e(status)} the {e(_usd(metrics.budget_usd))} budget: a {value:.0f}% "
            f"chance the bill ends over it (spent {e(_usd(metrics.month_spent_usd))}, "
            f"{e(_usd(metrics.month_expected_usd))} expected by the end; threshold "
            f"{threshold:g}%)"
        )
    run = f" ({e(metrics.latest_run_id)})" if metrics.latest_run_id else ""
    return f"latest run{run} GPU utilization {value:.1%} (floor {threshold:.1%})"


@dataclass(frozen=True)
class Notification:
    rule_id: int
    event: Event
    payload: dict[str, Any] = field(default_factory=dict)


def payload(
    *,
    pipeline: str,
    rule_id: int,
    kind: str,
    event: Event,
    value: float,
    threshold: float,
    metrics: Metrics,
    at: str,
) -> dict[str, Any]:
    """A Slack-compatible body (``text``, every interpolated value escaped) plus
    structured fields (plain JSON values, not markup)."""
    words = describe(kind, value, threshold, metrics)
    prefix = "" if event == "firing" else "resolved: "
    return {
        "text": f"[Cadence] {chat_escape(pipeline)}: {prefix}{words}",
        "pipeline": pipeline,
        "rule_id": rule_id,
        "kind": kind,
        "event": event,
        "value": value,
        "threshold": threshold,
        "url": f"/pipelines/{pipeline}#alerts",
        "evaluated_at": at,
    }
