"""The organisation's prior: what a small window borrows (docs/methodology.md 5.8).

Computed from every pipeline's window (``app.analytics.prior.prior_of``): the spread of
log cost around each pipeline's level, the tail of extra attempts, and the pipelines'
trend, each since the pipeline's own latest change.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from app.planning.change_points import change_evidence, find_splits, step_like

TREND_Z = 3.0  # a slope is clear beyond this many standard errors
PRIOR_WEIGHT = 4.0  # n0: the prior counts as this many retrainings
TAIL_WEIGHT_MAX = 60.0
SLOPE_FLOOR = 0.0005  # per day: 1.5% a month
RATE_STEPS = 200  # EM steps at most for the rate of changes (it moves < 1e-6 long before)


@dataclass(frozen=True)
class OrgPrior:
    """What a small window borrows: ``log_spread`` (sd of log base cost around a
    pipeline's level), ``tail_share`` (share of retrainings needing extra attempts) and
    ``tail_ratio`` (their extra cost over the pipeline's mean base); ``pipelines`` it was
    computed from (0: the fixed prior of a pipeline alone in its organisation)."""

    log_spread: float = 0.25
    tail_share: float = 0.05
    tail_ratio: float = 1.0
    pipelines: int = 0
    slope: float = 0.0  # mean slope of log cost per day
    slope_spread: float = 0.001  # sd of the pipelines' true slopes around it (per day)
    tail_weight: float = 4.0  # how many retrainings the tail share counts as
    slope_mean_se: float = math.inf  # how well the mean slope is known
    # How often a window's level changed (where its latest change may be is weighed
    # against it): the organisation's share, else an assumption, one window in five.
    change_rate: float = 0.2

    @property
    def clear_trend(self) -> bool:
        """Whether the organisation's pipelines clearly share a trend (mean slope more
        than TREND_Z of its standard errors from 0)."""
        return self.pipelines > 1 and abs(self.slope) > TREND_Z * self.slope_mean_se


FIXED_PRIOR = OrgPrior()


@dataclass(frozen=True)
class WindowStats:
    """What one pipeline's window gives the prior (computed once per window and kept:
    ``app.analytics.prior.prior_of``): the sum of squares of log base cost around its
    level and its degrees of freedom, its retrainings with extras and all of them, their
    extra over its mean base, and its slope with the slope's variance (None: no slope)."""

    ss: float
    dof: int
    tails: int
    count: int
    ratio_sum: float
    slope: tuple[float, float] | None
    change: float | None = None  # ln Bayes factor of its latest change (None: too short)


def window_stats(
    costs: Sequence[float], extras: Sequence[float], days: Sequence[float]
) -> WindowStats:
    """:class:`WindowStats` of one window, since its own latest change."""
    c, e = np.asarray(costs, dtype=float), np.asarray(extras, dtype=float)
    base = c - e
    ok = base > 0
    has = (e > 0) & ok
    # Spread and slope since the pipeline's own latest change (a step is no trend).
    y, x = np.log(base[ok]), np.asarray(days, dtype=float)[ok]
    found = find_splits(y, x)
    # Its latest change is weighed from the clear split before it (as the forecast does).
    # Its spread pooled with the fixed prior's, as a forecast pools it with the
    # organisation's (not known yet: it is what these windows make).
    since = found[-2] if len(found) > 1 else 0
    change = change_evidence(y[since:], x[since:], (FIXED_PRIOR.log_spread, PRIOR_WEIGHT))
    y, x = y[(at := found[-1] if found else 0) :], x[at:]
    ss = float(((y - y.mean()) ** 2).sum()) if y.size >= 2 else 0.0
    slope = _ols_slope(y, x) if y.size >= 3 and not step_like(y, x) else None
    ratio = float(e[has].sum() / base[ok].mean()) if ok.any() else 0.0
    return WindowStats(ss, max(y.size - 1, 0), int(has.sum()), c.size, ratio, slope, change)


def org_prior(
    windows: Iterable[tuple[Sequence[float], Sequence[float], Sequence[float]]],
) -> OrgPrior:
    """The prior from every pipeline's window of (costs, extras, days): :func:`combine`
    of their :func:`window_stats`."""
    return combine([window_stats(*w) for w in windows])


def combine(stats: Sequence[WindowStats]) -> OrgPrior:
    """The prior from every pipeline's window, weighted by size: pooled variance of log
    base cost (sum of (n_i - 1) s_i^2 over sum of (n_i - 1)), the share of retrainings
    with extras among all, and their mean extra over their pipeline's mean base. Check:
    two windows of bases (100, 100) and (100, 400): pooled log spread = sqrt((0 +
    (ln 4)^2 / 2) / 2) = 0.693; with extras (0, 0) and (0, 200) on totals (100, 100),
    (100, 600): tail share 1/4, ratio 200 / 250 = 0.8."""
    dof = sum(w.dof for w in stats)
    if len(stats) < 2 or dof < 1:
        return FIXED_PRIOR
    spread = math.sqrt(math.fsum(w.ss for w in stats) / dof)
    tails, count = sum(w.tails for w in stats), sum(w.count for w in stats)
    ratio = math.fsum(w.ratio_sum for w in stats) / tails if tails else FIXED_PRIOR.tail_ratio
    slope, slope_spread, slope_se = _slope_prior([w.slope for w in stats if w.slope])
    share = tails / count
    weight = _tail_weight([(float(w.tails), w.count) for w in stats], share)
    rate = _change_rate([w.change for w in stats if w.change is not None])
    return OrgPrior(spread, share, ratio, len(stats), slope, slope_spread, weight, slope_se, rate)


def rounded(prior: OrgPrior) -> OrgPrior:
    """The prior to two significant figures (the pipeline count kept): a new run moves
    an organisation's prior by less than that, so what is kept under it still holds."""

    def two(v: float) -> float:
        return float(f"{v:.2g}") if math.isfinite(v) else v

    return OrgPrior(
        two(prior.log_spread),
        two(prior.tail_share),
        two(prior.tail_ratio),
        prior.pipelines,
        two(prior.slope),
        two(prior.slope_spread),
        two(prior.tail_weight),
        two(prior.slope_mean_se),
        two(prior.change_rate),
    )


def _change_rate(evidence: list[float]) -> float:
    """The share of the windows whose level changed: each window's chance of a change,
    r = q B / (q B + 1 - q) (B its Bayes factor), averaged with one window of each kind
    added, q = (sum r + 1) / (N + 2), to the fixed point (EM). Check: Bayes factors
    inf, inf and 0: r = 1, 1, 0 whatever q, so q = 3 / 5."""
    if len(evidence) < 2:
        return FIXED_PRIOR.change_rate
    factor = np.exp(np.clip(evidence, -50.0, 50.0))
    rate = FIXED_PRIOR.change_rate
    for _ in range(RATE_STEPS):
        chance = rate * factor / (rate * factor + 1.0 - rate)
        rate, before = (float(chance.sum()) + 1.0) / (factor.size + 2.0), rate
        if abs(rate - before) < 1e-6:
            break
    return rate


def _tail_weight(shares: list[tuple[float, int]], p: float) -> float:
    """How many retrainings the prior's tail share counts as: p(1 - p) / tau^2 - 1, tau^2
    the variance of the pipelines' shares beyond the binomial's (method of moments),
    between PRIOR_WEIGHT and TAIL_WEIGHT_MAX (no excess: as sure as the cap allows)."""
    if p <= 0 or p >= 1 or len(shares) < 2:
        return PRIOR_WEIGHT
    k = np.array([s[0] for s in shares])
    n = np.array([s[1] for s in shares], dtype=float)
    excess = float(np.var(k / n, ddof=1) - p * (1 - p) * np.mean(1 / n))
    if excess <= 0:
        return TAIL_WEIGHT_MAX
    return min(max(p * (1 - p) / excess - 1, PRIOR_WEIGHT), TAIL_WEIGHT_MAX)


def _ols_slope(y: np.ndarray, x: np.ndarray) -> tuple[float, float]:
    """Least-squares slope of y on x and its variance (the org prior's raw material)."""
    xc = x - x.mean()
    sxx = float((xc**2).sum())
    if sxx <= 0:
        return 0.0, math.inf
    b = float((xc * (y - y.mean())).sum()) / sxx
    resid = y - y.mean() - b * xc
    return b, float((resid**2).sum()) / max(y.size - 2, 1) / sxx


def _slope_prior(slopes: list[tuple[float, float]]) -> tuple[float, float, float]:
    """Mean slope, the spread of true slopes around it (the variance of the estimates
    less their mean sampling variance, method of moments, never below SLOPE_FLOOR) and
    the mean's standard error.
    Unweighted: a small window's own variance estimate is too rough to weigh by (a few
    windows that happen to look tight would set the mean)."""
    usable = [(b, v) for b, v in slopes if math.isfinite(v) and v > 0]
    if len(usable) < 2:
        return 0.0, FIXED_PRIOR.slope_spread, math.inf
    b = np.array([u[0] for u in usable])
    v = np.array([u[1] for u in usable])
    mean = float(b.mean())
    between = float(np.var(b, ddof=1) - np.mean(v))
    # A pipeline's slope differs from the mean by the spread between pipelines, and the
    # mean itself is known to within var(b) / N.
    mean_var = float(np.var(b, ddof=1)) / b.size
    return mean, math.sqrt(max(between, SLOPE_FLOOR**2) + mean_var), math.sqrt(mean_var)
