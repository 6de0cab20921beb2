"""The organisation's cadence plan as a manager reads it: one row per pipeline (today,
proposed, change in expected bill and staleness, why), what the next $1,000 of budget
would buy and what a $1,000 cut would cost, what a budget too small for any plan would
need, and how the plan moves at half and double each uncertain input. The solver is
app/planning/org_plan.py; the words are app/planning/org_plan_words.py."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from app.planning import org_plan_words as words
from app.planning.org_plan import (
    Options,
    Solution,
    cheapest,
    needed_budget,
    org_draws,
    rest_of,
    solve,
    unconstrained,
)

STEP_USD = 1000.0  # the budget step a manager asks about
SENSITIVITY_LIMIT = 10  # uncertain inputs re-solved at half and double (each is a solve)


@dataclass(frozen=True)
class Row:
    name: str
    today: float
    proposed: float
    bill_change_usd: float
    staleness_change_usd: float | None
    why: str
    needs_evaluations: bool
    add_faster_usd: float | None  # without a curve: the next faster cadence's extra bill


@dataclass(frozen=True)
class Marginal:
    """The plan at another budget: its objective against this one's (positive: saved)."""

    budget_usd: float
    feasible: bool
    saving_usd: float
    moves: tuple[str, ...]
    sentence: str


@dataclass(frozen=True)
class Sensitivity:
    name: str
    what: str  # "value curve" or "bill spread"
    at_half: str  # the plan's change at half the value, in words
    at_double: str


@dataclass(frozen=True)
class OrgPlan:
    budget_usd: float
    risk: float
    feasible: bool
    sentence: str
    rows: tuple[Row, ...]
    expected_bill_usd: float
    bill_p90_usd: float
    p_over_budget: float
    today_expected_bill_usd: float
    objective_change_usd: float  # bill + staleness, plan minus today (negative: a saving)
    needed_budget_usd: float | None  # when no plan fits: the cheapest plan's need
    next_step: Marginal | None
    cut_step: Marginal | None
    sensitivity: tuple[Sensitivity, ...]
    lam: float | None


def plan(options: Sequence[Options], budget: float, risk: float, detail: bool = True) -> OrgPlan:
    """The plan and everything said about it (``detail``: the $1,000 steps and the
    half/double re-solves too, each a solve of its own). The pipelines that cannot move
    are solved as one fixed column (``rest_of``)."""
    moving = [o for o in options if o.movable]
    kept = [o for o in options if not o.movable]
    solved = [*moving, rest_of(kept)] if kept else moving
    found = solve(solved, budget, risk)
    base = unconstrained(solved, budget, risk)
    need = (
        None
        if found.feasible
        else needed_budget(org_draws(solved, cheapest(solved, budget, risk).choice), risk)
    )
    by_name = {o.name: _row(solved, i, found, base, risk) for i, o in enumerate(moving)}
    rows = tuple(by_name.get(o.name) or _kept_row(o) for o in options)
    return OrgPlan(
        budget_usd=budget,
        risk=risk,
        feasible=found.feasible,
        sentence=words.sentence(rows, found, budget, risk, need),
        rows=rows,
        expected_bill_usd=found.expected_bill_usd,
        bill_p90_usd=found.p90_usd,
        p_over_budget=found.p_over,
        today_expected_bill_usd=math.fsum(o.expected[o.today_index] for o in options),
        objective_change_usd=math.fsum(
            o.total(o.cadences.index(r.proposed)) - o.total(o.today_index)
            for o, r in zip(options, rows, strict=True)
        ),
        needed_budget_usd=need,
        next_step=_marginal(solved, found, budget + STEP_USD, risk) if detail else None,
        cut_step=_marginal(solved, found, max(budget - STEP_USD, 0.0), risk) if detail else None,
        sensitivity=_sensitivity(solved, found, budget, risk) if detail else (),
        lam=found.lam,
    )


def _kept_row(o: Options) -> Row:
    """The row of a pipeline that cannot move (no value curve, or one cadence only)."""
    t = o.today_index
    return Row(
        name=o.name,
        today=o.today,
        proposed=o.today,
        bill_change_usd=0.0,
        staleness_change_usd=None if o.staleness is None else 0.0,
        why=words.why(o, t, None),
        needs_evaluations=o.staleness is None,
        add_faster_usd=None if o.faster_usd is None else o.faster_usd - o.expected[t],
    )


def _row(options: Sequence[Options], i: int, found: Solution, base: Solution, risk: float) -> Row:
    o, j, t = options[i], found.choice[i], options[i].today_index
    stale = None if o.staleness is None else o.staleness[j] - o.staleness[t]
    held = None
    if o.movable and base.choice[i] != j and o.total(base.choice[i]) < o.total(j) - 1e-9:
        swapped = list(found.choice)
        swapped[i] = base.choice[i]
        need = needed_budget(org_draws(options, swapped), risk)
        held = (o.cadences[base.choice[i]], o.total(j) - o.total(base.choice[i]), need)
    return Row(
        name=o.name,
        today=o.today,
        proposed=o.cadences[j],
        bill_change_usd=o.expected[j] - o.expected[t],
        staleness_change_usd=stale,
        why=words.why(o, j, held),
        needs_evaluations=o.staleness is None,
        add_faster_usd=None if o.faster_usd is None else o.faster_usd - o.expected[t],
    )


def _marginal(options: Sequence[Options], found: Solution, budget: float, risk: float) -> Marginal:
    other = solve(options, budget, risk)
    saving = found.objective_usd - other.objective_usd if other.feasible else math.nan
    moves = tuple(
        f"{o.name} to {words.cadence(o.cadences[b])}"
        for o, a, b in zip(options, found.choice, other.choice, strict=True)
        if a != b
    )
    return Marginal(
        budget,
        other.feasible,
        saving,
        moves,
        words.marginal(budget, found.feasible, other.feasible, saving, moves),
    )


def _scaled(o: Options, what: str, factor: float) -> Options:
    if what == "value curve" and o.staleness is not None:
        return replace(o, staleness=tuple(s * factor for s in o.staleness))
    mean = o.draws.mean(axis=1, keepdims=True)
    return replace(o, draws=np.maximum(mean + (o.draws - mean) * factor, 0.0))


def _sensitivity(
    options: Sequence[Options], found: Solution, budget: float, risk: float
) -> tuple[Sensitivity, ...]:
    """For each uncertain input (at most SENSITIVITY_LIMIT), the plan re-solved with it
    at half and at double, said as the pipelines whose cadence would change."""
    flags = [
        (("value curve", o.thin_curve and o.movable), ("bill spread", o.thin_spread))
        for o in options
    ]
    uncertain = [(i, w) for i, f in enumerate(flags) for w, thin in f if thin][:SENSITIVITY_LIMIT]
    out = []
    for i, what in uncertain:
        said = []
        for factor in (0.5, 2.0):
            changed = list(options)
            changed[i] = _scaled(options[i], what, factor)
            other = solve(changed, budget, risk)
            said.append(words.changes(options, found.choice, other.choice))
        out.append(Sensitivity(options[i].name, what, said[0], said[1]))
    return tuple(out)
