"""An always-valid quality criterion for a gate that is re-checked after every run.

Pipelines re-check the gate after each run. A fixed-sample test at level alpha, looked at
after every run, passes a candidate that is truly worse by the margin far more often than
alpha (five looks at a 1.96 cutoff: about 14%; methodology.md §12). This module makes the quality
criterion group-sequential: the design states a maximum number of runs per arm ``N`` and
a look after every run from ``min_runs`` to ``N``; the type-I error alpha is spent over
the looks with the Lan-DeMets O'Brien-Fleming-type spending function
``alpha(t) = 2 (1 - Phi(z_{1 - alpha/2} / sqrt(t)))``, t = n / N (Lan & DeMets 1983).
It spends almost nothing early (a pass after 3 runs needs overwhelming evidence) and
keeps the last look's level close to alpha, so the power cost at N is small.

The critical values ``c_k`` for the correlated look statistics are computed exactly for
a Brownian motion on the information scale (the Armitage-McPherson-Rowe recursion,
Jennison & Turnbull 2000, ch. 19): at each look the probability of a first crossing
equals the alpha spent there. With few runs per arm the variance is estimated, so each
look uses its *nominal* level ``1 - Phi(c_k)`` with Welch's t quantile (Jennison &
Turnbull §3.6); the seeded simulation in tests/planning/test_sequential.py checks that
the false-pass rate over all looks stays at alpha. Pure: numpy and scipy only.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

import numpy as np
from scipy.optimize import brentq
from scipy.stats import norm, t

from app.planning.model import PlanningError
from app.planning.welch import p_value_above, runs_needed_per_arm, welch

DEFAULT_MAX_RUNS = 15
GRID_POINTS = 401  # the recursion's grid: within 2e-4 (in z) of 801 points, 7x faster
_GRID_SDS = 9.0  # the density grid reaches 9 standard deviations below zero


def obf_spending(fraction: float, alpha: float) -> float:
    """Alpha spent up to information fraction t: 2 (1 - Phi(z_{1-alpha/2} / sqrt(t))).

    At t = 1 this is alpha; at t = 0.2 with alpha = 0.05 about 1.2e-5.
    """
    if fraction <= 0:
        return 0.0
    z = float(norm.isf(alpha / 2.0))
    return float(2.0 * norm.sf(z / math.sqrt(min(1.0, fraction))))


@lru_cache(maxsize=64)
def critical_values(alpha: float, min_runs: int, max_runs: int) -> tuple[float, ...]:
    """One-sided z critical values c_k for looks at n = min_runs .. max_runs runs per arm.

    Information at look k is proportional to n_k (equal arms). S_k = Z_k sqrt(I_k) is a
    Brownian motion; its sub-density on the continuation region {S < c sqrt(I)} is
    carried from look to look on a grid (trapezoid rule), and c_k solves
    P(first crossing at look k) = alpha(t_k) - alpha(t_{k-1}).
    """
    if not 2 <= min_runs <= max_runs:
        raise PlanningError("the sequential design needs 2 <= min_runs <= max_runs")
    if not 0 < alpha < 0.5:
        raise PlanningError("alpha must be in (0, 0.5)")
    info = np.arange(min_runs, max_runs + 1, dtype=float) / max_runs
    spent = [obf_spending(float(i), alpha) for i in info]
    c = [float(norm.isf(spent[0]))]
    grid = np.linspace(-_GRID_SDS * math.sqrt(info[0]), c[0] * math.sqrt(info[0]), GRID_POINTS)
    density = norm.pdf(grid, scale=math.sqrt(info[0]))
    for k in range(1, len(info)):
        sd = math.sqrt(info[k] - info[k - 1])
        root = math.sqrt(info[k])
        mass = density * _trapezoid_weights(grid)
        target = spent[k] - spent[k - 1]

        ck = brentq(_excess_crossing, -10.0, 40.0, args=(mass, grid, sd, root, target), xtol=1e-10)
        c.append(float(ck))
        new_grid = np.linspace(-_GRID_SDS * root, ck * root, GRID_POINTS)
        density = mass @ norm.pdf((new_grid[None, :] - grid[:, None]) / sd) / sd
        grid = new_grid
    return tuple(c)


def _excess_crossing(
    ck: float, mass: Any, grid: Any, sd: float, root: float, target: float
) -> float:
    """P(first crossing of ck at this look) - the alpha to spend there."""
    return float(np.sum(mass * norm.sf((ck * root - grid) / sd))) - target


def _trapezoid_weights(grid: Any) -> Any:
    step = grid[1] - grid[0]
    weights = np.full(grid.shape, step)
    weights[0] = weights[-1] = step / 2.0
    return weights


@dataclass(frozen=True)
class SequentialDesign:
    """Looks after every run from ``min_runs`` to ``max_runs`` runs per arm, overall
    one-sided level ``alpha``. ``nominal_level(n)`` is the level a look with n runs in
    the smaller arm uses; past ``max_runs`` the design is spent and the last look's
    level is kept (the guarantee covers looks up to ``max_runs``)."""

    alpha: float = 0.05
    min_runs: int = 3
    max_runs: int = DEFAULT_MAX_RUNS
    # Runs still needed are for this power: the chance that the look decides, if the
    # observed means and variances are the truth (0.5 = the bound just clears).
    power: float = 0.8

    def __post_init__(self) -> None:
        if self.max_runs < self.min_runs or self.max_runs > 1000:
            raise PlanningError("max runs per arm must be between min_runs and 1000")
        if not 0.5 <= self.power < 1:
            raise PlanningError("power must be in [0.5, 1)")

    def nominal_level(self, n: int) -> float:
        values = critical_values(self.alpha, self.min_runs, self.max_runs)
        look = min(max(n, self.min_runs), self.max_runs) - self.min_runs
        return float(norm.sf(values[look]))


def sequential_bounds(diff: Any, se: Any, df: Any, level: Any) -> tuple[Any, Any]:
    """One-sided bounds diff -/+ t_{1-level}(df) se; numpy arrays or floats (elementwise).

    Used by the gate for one look and, vectorised, by the simulation that checks it.
    """
    half = t.isf(level, df) * se
    return diff - half, diff + half


@dataclass(frozen=True)
class LookDecision:
    """One look of the sequential non-inferiority test; the fields of a gate criterion."""

    value: float | None
    interval: tuple[float, float] | None
    status: Literal["pass", "fail", "undecided"]
    reason: str
    runs_needed_per_arm: int | None
    p_value: float | None


def sequential_decision(
    baseline: Sequence[float],
    candidate: Sequence[float],
    threshold: float,
    design: SequentialDesign,
    what: str,
) -> LookDecision:
    """Pass if the look's lower bound > threshold, fail if its upper bound < threshold.

    The look uses n = the smaller arm's size and its nominal level (see the module
    doc); ``p_value`` is the fixed-sample Welch p, shown for reference only.
    """
    nb, nc = len(baseline), len(candidate)
    n = min(nb, nc)
    if n < design.min_runs:
        value = (sum(candidate) / nc - sum(baseline) / nb) if n else None
        reason = (
            f"{what}: {nb} baseline and {nc} candidate values; the sequential test looks "
            f"from {design.min_runs} per arm on."
        )
        return LookDecision(value, None, "undecided", reason, design.min_runs - n, None)
    c = welch(baseline, candidate)
    if c.df is None:
        reason = (
            f"{what}: every run in both arms has the same value (difference {c.diff:.4g}); "
            "with zero variance the test cannot say how reliable that is."
        )
        return LookDecision(c.diff, None, "undecided", reason, None, None)
    level = design.nominal_level(n)
    lo, hi = sequential_bounds(c.diff, c.se, c.df, level)
    lo, hi = float(lo), float(hi)
    p = p_value_above(c, threshold)
    look = min(n, design.max_runs)
    numbers = (
        f"{what}: difference {c.diff:+.4g}, always-valid bounds {lo:.4g} to {hi:.4g} at look "
        f"{look} of {design.max_runs} (nominal level {level:.3g}, overall alpha "
        f"{design.alpha:g} however often it is checked; Welch df {c.df:.1f}) against a "
        f"threshold of {threshold:+.4g}"
    )
    if n > design.max_runs:
        numbers += (
            f"; past the design's {design.max_runs} runs per arm the last look's level is "
            "kept, and further looks are outside the guarantee"
        )
    status: Literal["pass", "fail", "undecided"] = (
        "pass" if lo > threshold else ("fail" if hi < threshold else "undecided")
    )
    if status != "undecided":
        return LookDecision(c.diff, (lo, hi), status, f"{numbers}: {status}.", None, p)
    needed = _runs_to_decide(c.var_baseline, c.var_candidate, c.diff - threshold, n, design)
    if needed is None:
        reason = f"{numbers}; the estimate sits on the threshold, so more runs cannot decide."
        return LookDecision(c.diff, (lo, hi), status, reason, None, p)
    reason = (
        f"{numbers}; about {needed} more runs per arm would decide it ({design.power:.0%} power)."
    )
    return LookDecision(c.diff, (lo, hi), status, reason, needed, p)


def _runs_to_decide(
    var_b: float, var_c: float, gap: float, n: int, design: SequentialDesign
) -> int | None:
    """Extra runs per arm until a later look decides with probability ``design.power``,
    if the means and variances hold: the first look m with
    |gap| >= (t_{1-level_m}(df) + t_power(df)) x sqrt(v / m), df = Welch's at m.

    Looks up to the design's maximum use their own (stricter) levels; beyond it, the
    final level with :func:`app.planning.welch.runs_needed_per_arm` at the same power.
    """
    if gap == 0 or not math.isfinite(gap):
        return None
    v = var_b + var_c
    share = v * v / (var_b**2 + var_c**2) if v > 0 else 1.0
    for m in range(n + 1, design.max_runs + 1):
        df = (m - 1) * share
        level = design.nominal_level(m)
        power_term = float(t.ppf(design.power, df)) if design.power > 0.5 else 0.0
        if abs(gap) >= (float(t.isf(level, df)) + power_term) * math.sqrt(v / m):
            return m - n
    final = design.nominal_level(design.max_runs)
    total = runs_needed_per_arm(var_b, var_c, gap, final, design.power)
    return None if total is None else max(design.max_runs + 1, total) - n
