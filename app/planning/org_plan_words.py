"""The organisation's cadence plan in words: the answer first ("With $50,000 a month at
10% risk: move recsys-ranker and fraud-detector to twice weekly (+$2,300 of bill, -$4,100
of staleness a month), keep 16 weekly, ..."), each row's why, the $1,000 steps."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from app.planning.org_plan import Options, Solution

NAMED = {
    0.5: "every other week",
    1.0: "weekly",
    2.0: "twice weekly",
    3.0: "three times a week",
    7.0: "daily",
}
NAME_AT_MOST = 3  # a group of more pipelines is counted, not named


class Planned(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def today(self) -> float: ...
    @property
    def proposed(self) -> float: ...
    @property
    def bill_change_usd(self) -> float: ...
    @property
    def staleness_change_usd(self) -> float | None: ...


def cadence(k: float) -> str:
    """'weekly', 'twice weekly', '1.5 times a week'."""
    return NAMED.get(k, f"{k:g} times a week")


def usd(x: float) -> str:
    return f"${abs(x):,.0f}"


def signed(x: float) -> str:
    return ("-" if x < -0.5 else "+") + usd(x)


def names(items: Sequence[str]) -> str:
    if len(items) > NAME_AT_MOST:
        return str(len(items))
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _groups(rows: Sequence[Planned], kind: str) -> dict[float, list[Any]]:
    out: dict[float, list[Any]] = {}
    for r in rows:
        moved = "faster" if r.proposed > r.today else "slower" if r.proposed < r.today else "keep"
        if moved == kind:
            out.setdefault(r.today if kind == "keep" else r.proposed, []).append(r)
    return out


def _staleness(rows: Sequence[Planned]) -> float:
    return sum(r.staleness_change_usd or 0.0 for r in rows)


def _clauses(rows: Sequence[Planned]) -> list[str]:
    out = []
    for k, group in sorted(_groups(rows, "faster").items(), reverse=True):
        bill = sum(r.bill_change_usd for r in group)
        out.append(
            f"move {names([r.name for r in group])} to {cadence(k)} ({signed(bill)} of bill, "
            f"{signed(_staleness(group))} of staleness a month)"
        )
    for k, group in sorted(_groups(rows, "keep").items()):
        out.append(f"keep {names([r.name for r in group])} {cadence(k)}")
    for k, group in sorted(_groups(rows, "slower").items(), reverse=True):
        bill = sum(r.bill_change_usd for r in group)
        out.append(
            f"move {names([r.name for r in group])} to {cadence(k)} (saves {usd(bill)}, "
            f"costs {usd(_staleness(group))} of staleness)"
        )
    return out


def sentence(
    rows: Sequence[Planned], found: Solution, budget: float, risk: float, need: float | None
) -> str:
    """The answer in one sentence (see the module doc); with no plan that fits, what the
    cheapest plan would need."""
    head = f"With {usd(budget)} a month at {risk * 100:.3g}% risk"
    if not rows:
        return f"{head}: there are no pipelines to plan."
    if not found.feasible:
        return (
            f"{head} no plan fits: even every pipeline that can slow down at its slowest "
            f"cadence goes over the budget with probability {found.p_over:.0%}; "
            f"a budget of {usd(need or 0.0)} would fit it."
        )
    return (
        f"{head}: {', '.join(_clauses(rows))}; the org bill is "
        f"{usd(found.expected_bill_usd)} expected, p90 {usd(found.p90_usd)}."
    )


def why(o: Options, j: int, held: tuple[float, float, float] | None) -> str:
    """Why a pipeline's row says what it says. ``held``: the cadence the budget holds it
    from, what that would save a month and the budget it would need."""
    if o.staleness is None:
        return "no value curve yet: needs evaluations (and a quality value); keeps today's cadence"
    t = o.today_index
    if held is not None:
        k, saving, need = held
        return (
            f"held back by the budget: {cadence(k)} would save {usd(saving)} a month more "
            f"and needs a budget of {usd(need)}"
        )
    if j == t:
        gate = "; its A/B gate does not allow faster" if o.gate_forbids else ""
        return f"today's cadence already costs least, bill plus staleness{gate}"
    bill, stale = o.expected[j] - o.expected[t], o.staleness[j] - o.staleness[t]
    if j > t:
        return f"a fresher model saves {usd(stale)} of staleness for {usd(bill)} more bill"
    return f"saves {usd(bill)} of bill for {usd(stale)} more staleness"


def changes(options: Sequence[Options], a: Sequence[int], b: Sequence[int]) -> str:
    """The pipelines whose cadence differs from plan ``a`` in plan ``b``, in words."""
    moved = [
        f"{o.name} {cadence(o.cadences[x])} -> {cadence(o.cadences[y])}"
        for o, x, y in zip(options, a, b, strict=True)
        if x != y
    ]
    return "; ".join(moved) if moved else "no change"


def marginal(
    budget: float, was_feasible: bool, feasible: bool, saving: float, moves: Sequence[str]
) -> str:
    """What the plan at ``budget`` does against this one."""
    at = f"At {usd(budget)}"
    if not feasible:
        return f"{at} no plan fits."
    if not was_feasible:
        return f"{at} a plan fits: {'; '.join(moves) or 'every pipeline as today'}."
    if not moves:
        return f"{at} the plan is the same."
    verb = "saves" if saving >= 0 else "costs"
    return f"{at}: {'; '.join(moves)}, which {verb} {usd(saving)} a month of bill plus staleness."
