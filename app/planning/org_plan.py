"""The organisation's cadence plan (docs/dashboard.md, "The cadence plan").

Each pipeline ``i`` may run at a few cadences ``k`` (runs a week). At each it has an
expected bill ``E_i(k)``, simulated bills (one draws array per cadence, the same draw
count for every pipeline) and, with a value curve, a staleness cost ``S_i(k)``. The plan
picks one cadence per pipeline to minimise ``sum_i E_i(k_i) + S_i(k_i)`` subject to
``P(sum_i B_i(k_i) > budget) <= risk``, the org bill drawn as the sum of the chosen
columns (draw ``d`` of the org bill is the sum of draw ``d`` of each chosen column, so
pipelines are independent exactly as their draws are).

The sum separates by pipeline, so a multiplier ``lam`` on dollars solves it fast: each
pipeline picks the ``k`` minimising ``(1 + lam) E + S``. As ``lam`` grows each pipeline
steps down its lower convex hull of (E, S) points at known breakpoints, so the search
walks the breakpoints in order (one pipeline changes at each, the org draws updated by
one column) and stops at the first plan meeting the chance constraint: the smallest
such ``lam``. The multiplier is not exact for a chance constraint (nor for a discrete
choice: a cadence off the hull is never picked, and the last step may overshoot), so a
greedy polish then takes, while any remains, the single move with the largest saving
that keeps the plan feasible. tests/planning/test_org_plan.py checks the result against
enumeration on random small portfolios.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from app.planning.model import PlanningError

CADENCES = (0.5, 1.0, 2.0, 3.0, 7.0)  # every other week, weekly, twice, three times, daily
HOURS_A_WEEK = 168.0
POLISH_MOVES = 200  # greedy moves at most: each is one pass over the candidate moves


@dataclass(frozen=True)
class Options:
    """One pipeline's choices, cadences ascending. ``draws`` has one row per cadence
    (simulated month bills); ``staleness`` is None without a value curve: the pipeline
    then keeps ``today`` (which must be one of the cadences)."""

    name: str
    today: float
    cadences: tuple[float, ...]
    expected: tuple[float, ...]
    draws: np.ndarray = field(repr=False, compare=False)
    staleness: tuple[float, ...] | None = None
    thin_curve: bool = False  # a value curve from few evaluations
    thin_spread: bool = False  # a bill whose forecast borrows spread (says so in words)
    gate_forbids: bool = False  # its A/B gate does not let it go faster than today
    # Without a curve: the expected bill at the next faster cadence a week can hold (what
    # evaluations would have to justify), None when none is faster.
    faster_usd: float | None = None

    def __post_init__(self) -> None:
        n = len(self.cadences)
        if n == 0 or len(self.expected) != n or self.draws.shape[0] != n:
            raise PlanningError(f"{self.name}: one expected bill and draws row per cadence")
        if self.staleness is not None and len(self.staleness) != n:
            raise PlanningError(f"{self.name}: one staleness cost per cadence")
        if list(self.cadences) != sorted(set(self.cadences)):
            raise PlanningError(f"{self.name}: cadences must be ascending and distinct")
        if self.today not in self.cadences:
            raise PlanningError(f"{self.name}: today's cadence must be one of the cadences")

    @property
    def today_index(self) -> int:
        return self.cadences.index(self.today)

    @property
    def movable(self) -> bool:
        return self.staleness is not None and len(self.cadences) > 1

    def total(self, j: int) -> float:
        """Expected bill plus staleness at cadence index ``j`` (staleness 0 without a curve)."""
        return self.expected[j] + (self.staleness[j] if self.staleness else 0.0)


def allowed_cadences(
    today: float,
    wall_clock_hours: float | None,
    faster_forbidden: bool = False,
    choices: Sequence[float] = CADENCES,
) -> tuple[float, ...]:
    """The cadences a pipeline may take: ``choices`` a week holds (k <= 168 / T: a run
    must finish before the next starts), none faster than today when its gate forbids
    it, and always today's own (a plan may keep what runs now)."""
    cap = math.inf if not wall_clock_hours else HOURS_A_WEEK / wall_clock_hours
    kept = {k for k in choices if k <= cap and not (faster_forbidden and k > today)}
    return tuple(sorted(kept | {today}))


@dataclass(frozen=True)
class Solution:
    """A choice (cadence index per pipeline), its objective and its org bill."""

    choice: tuple[int, ...]
    objective_usd: float
    expected_bill_usd: float
    p90_usd: float
    p_over: float
    feasible: bool
    lam: float | None = None  # the multiplier that found it (None: not the multiplier)


def org_draws(options: Sequence[Options], choice: Sequence[int]) -> np.ndarray:
    """The org bill's draws: the sum of each pipeline's chosen row."""
    return summed(o.draws[j] for o, j in zip(options, choice, strict=True))


def summed(rows: Iterable[np.ndarray]) -> np.ndarray:
    """Rows of draws added up in float64, one row at a time: np.sum of a list of 5,000
    rows stacks them first (0.48 s for 5,000 x 1,000 here), adding in place takes 0.03 s."""
    total: np.ndarray | None = None
    for row in rows:
        if total is None:
            total = row.astype(np.float64)
        else:
            total += row
    return np.zeros(1) if total is None else total


def needed_budget(draws: np.ndarray, risk: float) -> float:
    """The smallest budget b with P(org bill > b) <= risk on these draws: the smallest
    draw with at least 1 - risk of the draws at or below it."""
    return float(np.quantile(draws, 1.0 - risk, method="inverted_cdf"))


def evaluate(
    options: Sequence[Options],
    choice: Sequence[int],
    budget: float,
    risk: float,
    lam: float | None = None,
) -> Solution:
    draws = org_draws(options, choice)
    p_over = float(np.mean(draws > budget))
    return Solution(
        choice=tuple(choice),
        objective_usd=math.fsum(o.total(j) for o, j in zip(options, choice, strict=True)),
        expected_bill_usd=math.fsum(o.expected[j] for o, j in zip(options, choice, strict=True)),
        p90_usd=float(np.quantile(draws, 0.9, method="inverted_cdf")),
        p_over=p_over,
        feasible=p_over <= risk + 1e-12,
        lam=lam,
    )


def pick(o: Options, lam: float) -> int:
    """The cadence minimising (1 + lam) E + S; a pipeline without a curve keeps today.
    Ties go to today's cadence, then to the cheaper bill."""
    if not o.movable:
        return o.today_index
    assert o.staleness is not None
    scores = [(1.0 + lam) * e + s for e, s in zip(o.expected, o.staleness, strict=True)]
    best = min(scores)
    tied = [j for j, v in enumerate(scores) if v <= best + 1e-9 * (1.0 + abs(best))]
    return o.today_index if o.today_index in tied else min(tied, key=lambda j: o.expected[j])


def breakpoints(o: Options, start: int) -> list[tuple[float, int]]:
    """(lam, index) where the pipeline's pick moves down its hull as lam grows from the
    pick at 0 (``start``): at each it switches to the cadence with the steepest saving of
    bill per dollar of staleness, which ``(1 + lam)`` just makes worth it."""
    if not o.movable:
        return []
    assert o.staleness is not None
    out: list[tuple[float, int]] = []
    j, lam = start, 0.0
    while True:
        steps = [
            ((o.staleness[i] - o.staleness[j]) / (o.expected[j] - o.expected[i]) - 1.0, i)
            for i in range(len(o.cadences))
            if o.expected[i] < o.expected[j] - 1e-12
        ]
        if not steps:
            return out
        at, i = min(steps, key=lambda s: (s[0], o.expected[s[1]]))
        lam = max(lam, at)
        out.append((lam, i))
        j = i


def multiplier(options: Sequence[Options], budget: float, risk: float) -> Solution:
    """The smallest-multiplier plan meeting the chance constraint (the module doc), or
    the cheapest plan (every pipeline at its hull's cheapest cadence) marked infeasible."""
    choice = [pick(o, 0.0) for o in options]
    draws = org_draws(options, choice)
    if float(np.mean(draws > budget)) <= risk:
        return evaluate(options, choice, budget, risk, lam=0.0)
    events = sorted(
        (lam, i, j) for i, o in enumerate(options) for lam, j in breakpoints(o, choice[i])
    )
    lam = 0.0
    for at, i, j in events:
        draws = draws + (options[i].draws[j] - options[i].draws[choice[i]])
        choice[i], lam = j, at
        if float(np.mean(draws > budget)) <= risk:
            break
    return evaluate(options, choice, budget, risk, lam=lam)


def polish(options: Sequence[Options], found: Solution, budget: float, risk: float) -> Solution:
    """Greedy single moves from a feasible plan: of the moves that lower the objective
    and keep P(over) <= risk, take the one saving most; repeat (at most POLISH_MOVES)."""
    if not found.feasible:
        return found
    choice = list(found.choice)
    draws = org_draws(options, choice)
    for _ in range(POLISH_MOVES):
        best: tuple[float, int, int, np.ndarray] | None = None
        for i, o in enumerate(options):
            if not o.movable:
                continue
            here = o.total(choice[i])
            for j in range(len(o.cadences)):
                saving = here - o.total(j)
                if saving <= 1e-9 or (best is not None and saving <= best[0]):
                    continue
                moved = draws + (o.draws[j] - o.draws[choice[i]])
                if float(np.mean(moved > budget)) <= risk:
                    best = (saving, i, j, moved)
        if best is None:
            break
        _, i, j, draws = best
        choice[i] = j
    return evaluate(options, choice, budget, risk, lam=found.lam)


def solve(options: Sequence[Options], budget: float, risk: float) -> Solution:
    """The plan: the multiplier's, polished (see the module doc)."""
    if not (math.isfinite(budget) and budget >= 0):
        raise PlanningError("budget must be a number >= 0")
    if not 0.0 < risk < 1.0:
        raise PlanningError("risk must be between 0 and 1")
    return polish(options, multiplier(options, budget, risk), budget, risk)


def unconstrained(options: Sequence[Options], budget: float, risk: float) -> Solution:
    """What each pipeline would pick with no budget (lam = 0)."""
    return evaluate(options, [pick(o, 0.0) for o in options], budget, risk, lam=0.0)


def cheapest(options: Sequence[Options], budget: float, risk: float) -> Solution:
    """Every movable pipeline at its cheapest cadence, the others at today's."""
    choice = [int(np.argmin(o.expected)) if o.movable else o.today_index for o in options]
    return evaluate(options, choice, budget, risk)


def rest_of(options: Sequence[Options]) -> Options:
    """The pipelines that keep today's cadence, as one fixed choice: their expected bills
    and draws summed once, so a plan of 5,000 pipelines with a few value curves solves
    over those few (each solve would otherwise add up 5,000 rows again)."""
    draws = summed(o.draws[o.today_index] for o in options)[None, :]
    expected = math.fsum(o.expected[o.today_index] for o in options)
    return Options("(the pipelines kept as today)", 1.0, (1.0,), (expected,), draws)
