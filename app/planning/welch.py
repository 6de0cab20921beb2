"""Welch's unequal-variance t statistics for small A/B samples (Welch 1947)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from scipy.stats import norm, t

from app.planning.model import PlanningError

MAX_RUNS_PER_ARM = 1_000_000


@dataclass(frozen=True)
class WelchComparison:
    """candidate - baseline with its Welch standard error and Welch–Satterthwaite df.

    se = sqrt(vb/nb + vc/nc); df = se^4 / ((vb/nb)^2/(nb-1) + (vc/nc)^2/(nc-1)), with
    sample variances (n - 1 denominator). ``df`` is None when se = 0 (both arms constant).
    """

    n_baseline: int
    n_candidate: int
    mean_baseline: float
    mean_candidate: float
    var_baseline: float
    var_candidate: float
    diff: float
    se: float
    df: float | None


def welch(baseline: Sequence[float], candidate: Sequence[float]) -> WelchComparison:
    """Compare two samples of at least 2 values each (see :class:`WelchComparison`)."""
    nb, nc = len(baseline), len(candidate)
    if nb < 2 or nc < 2:
        raise PlanningError("Welch's t needs at least 2 values per arm")
    mb, mc = statistics.fmean(baseline), statistics.fmean(candidate)
    vb, vc = statistics.variance(baseline), statistics.variance(candidate)
    a, b = vb / nb, vc / nc
    se = math.sqrt(a + b)
    df = None
    if se > 0:
        # Welch-Satterthwaite, (a + b)^2 / (a^2/(nb-1) + b^2/(nc-1)), written with the
        # shares a/(a+b) and b/(a+b): the squares of tiny variances underflow to 0 otherwise
        # (hypothesis found variances ~1e-170 dividing by zero).
        ra, rb = a / (a + b), b / (a + b)
        df = 1.0 / (ra * ra / (nb - 1) + rb * rb / (nc - 1))
    return WelchComparison(nb, nc, mb, mc, vb, vc, mc - mb, se, df)


def t_quantile(p: float, df: float) -> float:
    """Student's t quantile t_p(df)."""
    return float(t.ppf(p, df))


# The smallest false-pass rate the gate takes: a one-in-a-million false pass is already
# stricter than any release decision needs (a one-standard-deviation gap, equal variances,
# power 0.8: 68 runs per arm against 14 at 0.05), and further down 1 - alpha leaves double
# precision (1 - 1e-20 is 1.0: an infinite quantile, once an OverflowError).
ALPHA_MIN = 1e-6


def upper_t(alpha: float, df: float) -> float:
    """t_{1-alpha}(df) computed from the upper tail: for a tiny alpha, 1 - alpha rounds to
    1 in floating point (alpha = 1e-20) and t_1 is infinite."""
    return float(t.isf(alpha, df))


def one_sided_bounds(c: WelchComparison, alpha: float) -> tuple[float, float]:
    """One-sided (1 - alpha) lower and upper confidence bounds of the difference:

    diff -/+ t_{1-alpha}(df) * se. Together they form the two-sided (1 - 2 alpha) interval.
    """
    if c.df is None:
        return c.diff, c.diff
    half = upper_t(alpha, c.df) * c.se
    return c.diff - half, c.diff + half


def p_value_above(c: WelchComparison, null: float) -> float:
    """One-sided p for H0: true diff <= null vs H1: diff > null: P(T_df > (diff - null) / se)."""
    if c.df is None:
        return 0.0 if c.diff > null else 1.0
    return float(t.sf((c.diff - null) / c.se, c.df))


def welch_bounds(
    c: WelchComparison, alpha: float, threshold: float
) -> tuple[tuple[float, float], float]:
    """(:func:`one_sided_bounds`, :func:`p_value_above` the threshold), as the gate uses them."""
    return one_sided_bounds(c, alpha), p_value_above(c, threshold)


def runs_needed_per_arm(
    var_baseline: float, var_candidate: float, gap: float, alpha: float, power: float = 0.5
) -> int | None:
    """Smallest equal per-arm n at which the test decides with probability ``power``.

    Assumes the observed means and variances are the truth: with gap = observed
    difference - threshold, se(n) = sqrt((vb + vc) / n) and Welch df(n) =
    (n - 1)(vb + vc)^2 / (vb^2 + vc^2), find the least n >= 2 with
    |gap| >= (t_{1-alpha}(df(n)) + t_{power}(df(n))) * se(n) (the usual power
    calculation, Welch's df). ``power`` = 0.5 is the n at which the observed difference
    would just clear the bound, which decides only about half the time; the gate asks
    for 0.8 (methodology.md §7). Start from the normal approximation
    n = ceil((z_{1-alpha} + z_power)^2 (vb + vc) / gap^2) (a lower bound) and step up.
    None when gap = 0 (the estimate sits exactly on the threshold: no n decides it)
    or the answer exceeds a million runs.
    """
    v = var_baseline + var_candidate
    if gap == 0 or not math.isfinite(gap):
        return None
    if v <= 0:
        return 2
    if not 0.5 <= power < 1:
        raise PlanningError("power must be in [0.5, 1)")
    z = float(norm.isf(alpha)) + float(norm.ppf(power))  # isf: see upper_t
    df_factor = v * v / (var_baseline**2 + var_candidate**2)

    def clears(n: int) -> bool:  # monotone in n: se and the t quantiles all shrink
        df = (n - 1) * df_factor
        quantile = upper_t(alpha, df) + (t_quantile(power, df) if power > 0.5 else 0.0)
        return abs(gap) >= quantile * math.sqrt(v / n)

    ratio = z / abs(gap)  # not z*z/(gap*gap): a denormal gap squared is 0 (division error)
    estimate = ratio * ratio * v  # infinite for such a gap: beyond any n
    if not math.isfinite(estimate) or estimate > MAX_RUNS_PER_ARM:
        return None
    low = max(2, math.ceil(estimate))
    high = low
    while not clears(high):  # exponential search for an n that clears ...
        low, high = high, high * 2
        if high > 2 * MAX_RUNS_PER_ARM:
            return None
    while high - low > 1:  # ... then bisect: clears(high) and not clears(low)
        mid = (low + high) // 2
        low, high = (low, mid) if clears(mid) else (mid, high)
    return high if high <= MAX_RUNS_PER_ARM else None
