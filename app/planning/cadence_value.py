"""The cost-optimal retraining cadence: retraining spend against staleness (methodology.md §11).

At k runs per week with ``c`` USD per run and ``wpm`` weeks per month:

- retrain(k) = k wpm c;
- staleness(k) = V x mean quality loss over a model's life of 1/k weeks, V = USD per
  month that one unit of the metric is worth. Linear decay: V b / (2k);
- total(k) = retrain(k) + staleness(k).

For linear decay the optimum is closed-form, k* = sqrt(V b / (2 wpm c)); for exponential
decay (or b <= 0) it is found numerically on a fine grid refined by a bounded scalar
search. Cadences run from monthly (12/52 runs/week) to daily (7); feasible cadences also
keep retrain(k) within the budget and k <= 168 / T (a run must finish before the next).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import minimize_scalar

from app.planning.decay import Decay
from app.planning.model import PlanningError

MONTHLY = 12.0 / 52.0
DAILY = 7.0
CURVE_POINTS = 60
_FINE_GRID = 4000


@dataclass(frozen=True)
class CadenceCost:
    runs_per_week: float
    interval_days: float
    retrain_usd: float
    staleness_usd: float
    total_usd: float
    extrapolated: bool


@dataclass(frozen=True)
class CadenceValue:
    """The curve, the optimum and its neighbours. ``best_feasible`` is None when even a
    monthly cadence is over budget or longer runs than a week forbid any."""

    curve: tuple[CadenceCost, ...]
    optimum: CadenceCost
    optimum_unbounded_runs_per_week: float | None
    best_feasible: CadenceCost | None
    max_runs_per_week: float
    optimum_at_half_value: float
    optimum_at_double_value: float
    today: CadenceCost | None
    weekly: CadenceCost
    saving_vs_weekly_usd: float
    sentence: str
    notes: tuple[str, ...]
    # The scenario's proposed cadence and what it buys against today's (None: not asked,
    # or no today to compare with).
    proposed: CadenceCost | None = None
    proposed_sentence: str | None = None


def linear_optimum(
    value_usd: float, rate_per_week: float, wpm: float, cost_per_run: float
) -> float:
    """k* = sqrt(V b / (2 wpm c)), where d total / dk = wpm c - V b / (2 k^2) = 0."""
    if cost_per_run <= 0 or wpm <= 0:
        raise PlanningError("cost per run and weeks per month must be > 0")
    return math.sqrt(max(value_usd * rate_per_week, 0.0) / (2.0 * wpm * cost_per_run))


def cost_at(
    k: float,
    decay: Decay,
    value_usd: float,
    wpm: float,
    cost_per_run: float,
    max_reliable_age_weeks: float | None = None,
) -> CadenceCost:
    """retrain, staleness and total monthly USD at k runs per week (see the module doc)."""
    if not (math.isfinite(k) and k > 0):
        raise PlanningError("runs per week must be > 0")
    retrain = k * wpm * cost_per_run
    staleness = max(0.0, value_usd * decay.mean_loss(1.0 / k))
    far = max_reliable_age_weeks is not None and 1.0 / k > max_reliable_age_weeks
    return CadenceCost(k, 7.0 / k, retrain, staleness, retrain + staleness, far)


def _argmin(decay: Decay, value: float, wpm: float, cost: float, lo: float, hi: float) -> float:
    """Minimise total(k) over [lo, hi]: closed form when linear, else grid + refinement."""
    if decay.model == "linear" and decay.rate_per_week > 0:
        return min(max(linear_optimum(value, decay.rate_per_week, wpm, cost), lo), hi)
    if hi <= lo:
        return lo
    grid = np.geomspace(lo, hi, _FINE_GRID)
    totals = [cost_at(float(k), decay, value, wpm, cost).total_usd for k in grid]
    i = int(np.argmin(totals))
    a, b = float(grid[max(i - 1, 0)]), float(grid[min(i + 1, len(grid) - 1)])
    if b <= a:
        return float(grid[i])
    found = minimize_scalar(
        lambda k: cost_at(k, decay, value, wpm, cost).total_usd,
        bounds=(a, b),
        method="bounded",
        options={"xatol": 1e-9},
    )
    return float(found.x) if found.fun <= totals[i] else float(grid[i])


def cadence_value(
    decay: Decay,
    *,
    value_usd_per_unit_month: float,
    cost_per_run_usd: float,
    weeks_per_month: float,
    wall_clock_hours: float,
    budget_usd: float | None = None,
    today_runs_per_week: float | None = None,
    max_reliable_age_weeks: float | None = None,
    proposed_runs_per_week: float | None = None,
) -> CadenceValue:
    """The whole answer of ``GET .../cadence`` from a decay, a value and a cost per run."""
    if not (math.isfinite(value_usd_per_unit_month) and value_usd_per_unit_month >= 0):
        raise PlanningError("the quality value must be >= 0")
    if not (math.isfinite(wall_clock_hours) and wall_clock_hours > 0):
        raise PlanningError("wall clock hours must be > 0")
    v, wpm, c = value_usd_per_unit_month, weeks_per_month, cost_per_run_usd
    if c <= 0:
        raise PlanningError("cost per run must be > 0")

    def at(k: float, value: float = v) -> CadenceCost:
        return cost_at(k, decay, value, wpm, c, max_reliable_age_weeks)

    curve = tuple(at(float(k)) for k in np.geomspace(MONTHLY, DAILY, CURVE_POINTS))
    best = at(_argmin(decay, v, wpm, c, MONTHLY, DAILY))
    unbounded = None
    if decay.model == "linear" and decay.rate_per_week > 0:
        unbounded = linear_optimum(v, decay.rate_per_week, wpm, c)
    cap = min(DAILY, 168.0 / wall_clock_hours)
    if budget_usd is not None:
        cap = min(cap, budget_usd / (wpm * c))  # retrain(k) <= budget
    feasible = at(_argmin(decay, v, wpm, c, MONTHLY, cap)) if cap >= MONTHLY else None
    weekly = at(1.0)
    saving = weekly.total_usd - best.total_usd
    today = at(today_runs_per_week) if today_runs_per_week else None
    proposed = at(proposed_runs_per_week) if proposed_runs_per_week else None
    notes = _notes(decay, unbounded, best, feasible, budget_usd, wall_clock_hours)
    return CadenceValue(
        curve=curve,
        optimum=best,
        optimum_unbounded_runs_per_week=unbounded,
        best_feasible=feasible,
        max_runs_per_week=min(DAILY, 168.0 / wall_clock_hours),
        optimum_at_half_value=_argmin(decay, v / 2.0, wpm, c, MONTHLY, DAILY),
        optimum_at_double_value=_argmin(decay, v * 2.0, wpm, c, MONTHLY, DAILY),
        today=today,
        weekly=weekly,
        saving_vs_weekly_usd=saving,
        sentence=headline(best, saving),
        notes=notes,
        proposed=proposed,
        proposed_sentence=proposed_words(proposed, today),
    )


def proposed_words(proposed: CadenceCost | None, today: CadenceCost | None) -> str | None:
    """What moving from today's cadence to the proposed one buys, in dollars a month.

    Check (methodology.md §11.2: V = $200,000, b = 0.004 AUC/week, $280 a run): today
    1/week is $1,213.33 retraining + $400 staleness; 2/week is $2,426.67 + $200, so
    "$1,213 more in retraining and $200 less in staleness: $1,013 a month more in all".
    """
    if proposed is None or today is None or proposed.runs_per_week == today.runs_per_week:
        return None
    retrain = proposed.retrain_usd - today.retrain_usd
    stale = today.staleness_usd - proposed.staleness_usd
    total = proposed.total_usd - today.total_usd
    more_or_less = "more" if retrain >= 0 else "less"
    fresher = "less" if stale >= 0 else "more"
    net = "more" if total > 0 else "less"
    return (
        f"Retraining {proposed.runs_per_week:g}×/week instead of today's "
        f"{today.runs_per_week:g}×/week costs ${abs(retrain):,.0f} {more_or_less} in "
        f"retraining and ${abs(stale):,.0f} {fresher} in staleness: ${abs(total):,.0f} a "
        f"month {net} in all."
    )


def every(interval_days: float) -> str:
    """'every 12 days', 'every day', 'weekly' for an interval in days."""
    days = round(interval_days)
    if days == 7:
        return "weekly"
    return "every day" if days <= 1 else f"every {days} days"


def headline(best: CadenceCost, saving_vs_weekly: float) -> str:
    """'Retraining every 12 days minimises cost: $X/month less than weekly'."""
    if round(best.interval_days) == 7 or saving_vs_weekly < 0.5:
        return "Retraining weekly already minimises cost (retraining plus staleness)."
    return (
        f"Retraining {every(best.interval_days)} minimises cost: "
        f"${saving_vs_weekly:,.0f}/month less than weekly."
    )


def _notes(
    decay: Decay,
    unbounded: float | None,
    best: CadenceCost,
    feasible: CadenceCost | None,
    budget: float | None,
    wall_clock_hours: float,
) -> tuple[str, ...]:
    notes = []
    if decay.rate_per_week <= 0:
        notes.append("No decay: staleness costs nothing, so the least frequent cadence wins.")
    if unbounded is not None and not MONTHLY <= unbounded <= DAILY:
        where = "below monthly" if unbounded < MONTHLY else "above daily"
        notes.append(f"The unconstrained optimum ({unbounded:.3g} runs/week) is {where}.")
    if best.extrapolated:
        notes.append(
            "The optimum's retraining interval is far longer than any evaluated model age: "
            "the decay there is an extrapolation."
        )
    if feasible is None:
        notes.append(
            "No cadence from monthly to daily fits: even monthly retraining exceeds the "
            f"budget (${budget:,.0f}) or a run ({wall_clock_hours:g} h) is too long."
        )
    elif feasible.runs_per_week < best.runs_per_week - 1e-9:
        notes.append(
            "Within the budget and k <= 168 / T the best is "
            f"{feasible.runs_per_week:.3g} runs/week."
        )
    return tuple(notes)
