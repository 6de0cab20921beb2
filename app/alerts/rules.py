"""Alert rules as pure functions: validation, firing, transitions and the message.

No database, no HTTP. Values per kind:

- ``cost_over_budget``: projected monthly cost at the pipeline's current cadence as a
  percent of its monthly budget; fires when it is above ``threshold`` (percent, e.g. 100).
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
from typing import Any, Literal
from urllib.parse import urlsplit

Kind = Literal["cost_over_budget", "goodput_drop", "utilization_floor"]
Event = Literal["firing", "resolved"]
KINDS: tuple[str, ...] = ("cost_over_budget", "goodput_drop", "utilization_floor")

# Accepted thresholds per kind (exclusive low, inclusive high) and their unit.
THRESHOLD_RANGES: dict[str, tuple[float, float, str]] = {
    "cost_over_budget": (0.0, 10_000.0, "percent of the monthly budget, e.g. 100"),
    "goodput_drop": (0.0, 100.0, "points of weekly goodput, e.g. 10"),
    "utilization_floor": (0.0, 1.0, "a utilization fraction, e.g. 0.4"),
}
MAX_URL_LENGTH = 2000


def threshold_problem(kind: str, threshold: float) -> str | None:
    """Why ``threshold`` is not acceptable for ``kind``, or None."""
    if kind not in THRESHOLD_RANGES:
        return None  # the kind itself is refused elsewhere
    low, high, unit = THRESHOLD_RANGES[kind]
    if not math.isfinite(threshold):
        return "must be a finite number"
    if low < threshold <= high:
        return None
    hint = ""
    if kind == "utilization_floor" and 1 < threshold <= 100:
        hint = f"; {threshold:g} looks like a percentage: send {threshold / 100:g}"
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
    if kind == "utilization_floor":
        return value < threshold
    return value > threshold  # cost_over_budget (percent), goodput_drop (points)


def transition(was_firing: bool, now_firing: bool | None) -> Event | None:
    """Fire on change, not on every evaluation: the event to send, or None."""
    if now_firing is None or now_firing == was_firing:
        return None
    return "firing" if now_firing else "resolved"


@dataclass(frozen=True)
class Metrics:
    """What evaluation read for one pipeline (None: not known)."""

    projected_monthly_cost_usd: float | None = None
    budget_usd: float | None = None
    goodput_latest: float | None = None  # overall goodput 0..1
    goodput_previous: float | None = None
    latest_week: str | None = None  # ISO week labels
    previous_week: str | None = None
    latest_utilization: float | None = None
    latest_run_id: str | None = None

    def value(self, kind: str) -> float | None:
        if kind == "cost_over_budget":
            cost, budget = self.projected_monthly_cost_usd, self.budget_usd
            if cost is None or budget is None or budget <= 0:
                return None
            return 100.0 * cost / budget
        if kind == "goodput_drop":
            if self.goodput_latest is None or self.goodput_previous is None:
                return None
            return 100.0 * (self.goodput_previous - self.goodput_latest)
        if kind == "utilization_floor":
            return self.latest_utilization
        raise ValueError(f"unknown alert kind {kind!r}")


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
    """The condition in words, e.g. "projected monthly cost $2,456 is 175% of ...";
    every value from the data is escaped for chat markup (:func:`chat_escape`)."""
    e = chat_escape
    if kind == "cost_over_budget":
        return (
            f"projected monthly cost {e(_usd(metrics.projected_monthly_cost_usd))} is "
            f"{value:.0f}% of the {e(_usd(metrics.budget_usd))} budget (threshold {threshold:g}%)"
        )
    if kind == "goodput_drop":
        prev, last = metrics.goodput_previous or 0.0, metrics.goodput_latest or 0.0
        return (
            f"weekly goodput {e(metrics.previous_week)} {prev:.1%} -> {e(metrics.latest_week)} "
            f"{last:.1%}, a drop of {value:.1f} points (threshold {threshold:g} points)"
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
