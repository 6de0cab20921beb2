"""The decision card: one sentence answering "can we afford the target cadence, and is
it safe?" for the scenario on the page. Pure: it words the numbers the projection and
the gate already computed (``views.headline`` rows and the gate's result), so the card
can never disagree with the sections below it or with the API."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

VERDICT_WORDS = {"PASS": "PASS", "FAIL": "FAIL", "INSUFFICIENT_DATA": "NOT YET"}


@dataclass(frozen=True)
class Decision:
    sentence: str
    affordable: bool | None  # None: no budget or no projection to compare
    verdict: str | None  # PASS / FAIL / NOT YET, None without a gate
    reason: str | None
    # The card's colour: "good" (fits and the gate passes, or no gate), "bad" (does not
    # fit, or the gate fails), "neutral" otherwise. Never green beside a FAIL.
    tone: str = "neutral"


# Whether a row fits: the one test (P(bill > budget) below the risk tolerance), which
# the projection already applied (``within_budget``), so the card, the gate and the
# portfolio never disagree (app/planning/budget_status.py).
def _fits(row: Mapping[str, Any]) -> bool:
    return bool(row.get("within_budget"))


def _chance(row: Mapping[str, Any]) -> float:
    p = row.get("p_over_budget")
    return 0.0 if p is None else float(p)


def cadence_words(runs_per_week: float) -> str:
    """``1`` -> "Weekly", ``2`` -> "Twice weekly", ``0.5`` -> "Every two weeks"."""
    named = {1.0: "Weekly", 2.0: "Twice weekly", 3.0: "Three times a week", 7.0: "Daily"}
    if runs_per_week in named:
        return named[runs_per_week]
    if runs_per_week == 0.5:
        return "Every two weeks"
    return f"{runs_per_week:g} runs a week"


def _usd(value: float) -> str:
    return f"${value:,.0f}"


def _option(row: Mapping[str, Any], describe: Mapping[str, str]) -> str:
    name = row["variant"]
    about = describe.get(name)
    label = f"{name} ({about})" if about else name
    chance = "" if row.get("p_over_budget") is None else f", {_chance(row):.0%} chance over"
    return f"{label}: {_usd(row['monthly_cost_usd'])} expected bill, p90 {_usd(row['p90'])}{chance}"


def decide(
    headline: Sequence[Mapping[str, Any]],
    budget: float | None,
    gate: Any | None,
    runs_per_week: float,
    descriptions: Mapping[str, str] | None = None,
    basis: str = "p90",
) -> Decision:
    """Word the scenario's outcome. ``headline``: one row per variant (monthly cost = the
    expected bill, its p90, P(bill > budget) and ``within_budget``, the one test);
    ``gate``: a ``GateOut`` or None. ``basis`` is kept for callers and decides nothing:
    "fits" is P(bill > budget) below the risk tolerance, as in the gate."""
    describe = descriptions or {}
    when = cadence_words(runs_per_week)
    verdict = reason = None
    if gate is not None:
        verdict = VERDICT_WORDS.get(gate.result.verdict, gate.result.verdict)
        # The gate's own sentence ("PASS: the candidate fits ...") without its verdict,
        # so the card and the gate section below say the same thing.
        sentence = getattr(gate, "headline", None)
        reason = sentence.split(": ", 1)[-1] if sentence else gate.result.summary
    if not headline:
        affordable = None
        cost = f"{when}: no runs to project a cost from yet."
    elif budget is None:
        affordable = None
        options = "; ".join(_option(r, describe) for r in headline)
        cost = f"{when} costs {options}. No budget is set to compare with."
    else:
        fits = [r for r in headline if _fits(r)]
        affordable = bool(fits)
        if len(fits) == len(headline):
            cost = f"{when} fits the {_usd(budget)} budget with every variant: "
            cost += "; ".join(_option(r, describe) for r in fits)
        elif fits:
            cost = f"{when} fits the {_usd(budget)} budget only with "
            cost += "; ".join(_option(r, describe) for r in fits)
        else:
            safest = min(headline, key=_chance)
            cost = (
                f"{when} does not fit the {_usd(budget)} budget: the likeliest to stay "
                f"within it, {_option(safest, describe)}"
            )
        cost += "."
    safe = f" Gate: {verdict}, {reason}" if verdict else " Gate: no candidate to test yet."
    if verdict and not safe.endswith("."):
        safe += "."
    return Decision(cost + safe, affordable, verdict, reason, _tone(affordable, verdict))


def _tone(affordable: bool | None, verdict: str | None) -> str:
    if affordable is False or verdict == "FAIL":
        return "bad"
    if affordable and verdict in (None, "PASS"):
        return "good"
    return "neutral"
