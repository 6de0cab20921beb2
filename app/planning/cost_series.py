"""The series of retraining costs as the forecast reads it (docs/methodology.md, "Costs move").

Input: a pipeline's retraining costs, oldest first, each with its start (days since the
epoch) and the part paid for extra attempts (failed attempts of the same retraining), and
the declared change times. Output (:class:`CostModel`): what the bill draws future
retraining costs from (:mod:`app.planning.series_bill`):

1. *Change point*: the window starts after the latest change, declared or found. A split
   is found when two levels of log base cost (the cost without extra attempts, so a rare
   rerun is not a change) explain the costs clearly better than one level and better
   than a straight trend: n log(RSS_one / RSS_two) > :data:`SPLIT_PENALTY` + 3 log n,
   searched by binary segmentation (the best split, then again in the part after it).
2. *Trend*: Theil-Sen slope of log base cost on time over the window since the change,
   used only when clearly non-zero (|slope| > :data:`TREND_Z` standard errors, and at
   least :data:`TREND_MIN` retrainings); the window is then brought to its middle day
   (c x exp(-slope x (day - middle))) and each future retraining priced at its own
   date, the slope's standard error widening the band (more the further it is).
3. *Borrowed strength*: a window of n < :data:`BORROW_BELOW` retrainings since the
   change takes a share ``borrow`` = n0 / (n + n0) of its draws from the organisation's
   prior (:class:`OrgPrior`: the spread of log cost around each pipeline's level and the
   tail of extra attempts); with fewer than :data:`FEW` retrainings, all of them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np

from app.planning.model import PlanningError

SECONDS_PER_DAY = 86_400.0
DAYS_PER_MONTH = 30.436875  # 365.2425 / 12
SPLIT_PENALTY = 6.0
SPLIT_MIN = 8  # no split is searched in fewer retrainings
SPLIT_SIDE = 2  # retrainings at least on each side of a found split
MIN_STEP = 0.10  # a found split moves the level by at least 10%
TREND_Z = 3.0
TREND_MIN = 8
BORROW_BELOW = 10
PRIOR_WEIGHT = 4.0  # n0: the prior counts as this many retrainings
FEW = 3
TAIL_WEIGHT_MAX = 60.0
SPREAD_WEIGHT = 8.0  # the prior's spread counts as this many retrainings
SLOPE_FLOOR = 0.0005  # per day: 1.5% a month


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

    @property
    def clear_trend(self) -> bool:
        """Whether the organisation's pipelines clearly share a trend (mean slope more
        than TREND_Z of its standard errors from 0)."""
        return self.pipelines > 1 and abs(self.slope) > TREND_Z * self.slope_mean_se

    @property
    def tail_mean(self) -> float:
        """Expected extra cost over the base, as a share of it: share x ratio."""
        return self.tail_share * self.tail_ratio


FIXED_PRIOR = OrgPrior()


def org_prior(
    windows: Iterable[tuple[Sequence[float], Sequence[float], Sequence[float]]],
) -> OrgPrior:
    """The prior from every pipeline's window of (costs, extras), weighted by size:
    pooled variance of log base cost (sum of (n_i - 1) s_i^2 over sum of (n_i - 1)), the
    share of retrainings with extras among all, and their mean extra over their
    pipeline's mean base. Check: two windows of bases (100, 100) and (100, 400):
    pooled log spread = sqrt((0 + (ln 4)^2 / 2) / 2) = 0.693; with extras (0, 0) and
    (0, 200) on totals (100, 100), (100, 600): tail share 1/4, ratio 200 / 250 = 0.8."""
    ss = dof = tails = count = ratio_sum = 0.0
    pipelines = 0
    slopes: list[tuple[float, float]] = []
    shares: list[tuple[float, int]] = []
    for costs, extras, days in windows:
        c, e = np.asarray(costs, dtype=float), np.asarray(extras, dtype=float)
        base = c - e
        ok = base > 0
        has = (e > 0) & ok
        # Spread and slope since each pipeline's own latest change (a step is no trend).
        y, x = np.log(base[ok]), np.asarray(days, dtype=float)[ok]
        y, x = y[(at := find_split(y, x) or 0) :], x[at:]
        if y.size >= 2:
            ss, dof = ss + float(((y - y.mean()) ** 2).sum()), dof + y.size - 1
        if y.size >= 3 and not step_like(y, x):  # a step missed is not a trend
            slopes.append(_ols_slope(y, x))
        shares.append((float(has.sum()), c.size))
        tails, count = tails + has.sum(), count + c.size
        ratio_sum += float(e[has].sum() / base[ok].mean()) if ok.any() else 0.0
        pipelines += 1
    if pipelines < 2 or dof < 1:
        return FIXED_PRIOR
    spread = math.sqrt(ss / dof)
    ratio = ratio_sum / tails if tails else FIXED_PRIOR.tail_ratio
    slope, slope_spread, slope_se = _slope_prior(slopes)
    share = float(tails / count)
    weight = _tail_weight(shares, share)
    return OrgPrior(spread, share, ratio, pipelines, slope, slope_spread, weight, slope_se)


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


@dataclass(frozen=True)
class Change:
    """The latest change: its day, the level ratio after / before, declared or found."""

    day: float
    ratio: float
    declared: bool
    description: str = ""


@dataclass(frozen=True)
class CostModel:
    """The window since the latest change: ``bases`` (costs without extra attempts)
    brought to ``anchor_day`` when a trend is used; the slope of log cost per day and its
    standard error (both 0 without a trend); the share of draws borrowed from the prior;
    the tail (``tail_share`` of retrainings add ``tail_ratio`` x their base); and the
    sentences that say what was used."""

    bases: np.ndarray
    anchor_day: float
    slope: float
    slope_se: float
    borrow: float
    tail_share: float
    tail_ratio: float
    prior: OrgPrior
    change: Change | None
    sentences: tuple[str, ...]

    @property
    def size(self) -> int:
        return int(self.bases.size)

    def borrowed_spread(self) -> float:
        """Log spread of a borrowed draw: the window's own (n - 1 degrees of freedom)
        pooled with the prior's, which counts as PRIOR_WEIGHT degrees of freedom."""
        pos = self.bases[self.bases > 0]
        own = float(np.var(np.log(pos), ddof=1)) if pos.size >= 2 else 0.0
        dof = max(pos.size - 1, 0)
        prior = self.prior.log_spread**2
        return math.sqrt((dof * own + PRIOR_WEIGHT * prior) / (dof + PRIOR_WEIGHT))

    def mean_cost(self) -> float:
        """E[a retraining's cost] at the anchor: mean base x (1 + tail share x ratio)."""
        return float(self.bases.mean()) * (1.0 + self.tail_share * self.tail_ratio)


def days_of(moments: Iterable[datetime]) -> np.ndarray:
    """Days since the epoch (UTC) of each moment."""
    return np.asarray([m.astimezone(UTC).timestamp() / SECONDS_PER_DAY for m in moments])


def find_split(y: np.ndarray, x: np.ndarray) -> int | None:
    """The first index after the latest clear level shift of ``y`` (log base costs at
    days ``x``), or None: binary segmentation, each split tested against one level and
    against a straight line. Check: (0, 0, 0, 0, 0, 0, ln .65 x 4 ...) splits at 6."""
    start, found = 0, None
    while True:
        k = _best_split(y[start:], x[start:])
        if k is None:
            return found
        start = found = start + k


def _best_split(y: np.ndarray, x: np.ndarray) -> int | None:
    fits = _fits(y, x)
    if fits is None:
        return None
    at, rss_one, rss_two, rss_line = fits
    n = y.size
    step = abs(float(y[at:].mean() - y[:at].mean()))
    clear = n * math.log(rss_one / rss_two) > SPLIT_PENALTY + 3 * math.log(n)
    beats_line = n * math.log(rss_line / rss_two) > 1.5 * SPLIT_PENALTY
    if clear and beats_line and step > math.log1p(MIN_STEP):
        return at
    return None


def step_like(y: np.ndarray, x: np.ndarray) -> bool:
    """Whether the best single step explains ``y`` better than a straight line, by more
    than its searched position buys (n ln(RSS_line / RSS_two) > 2 ln n): then a slope
    found in it is a step not found clearly enough, not a trend."""
    fits = _fits(y, x)
    return fits is not None and y.size * math.log(fits[3] / fits[2]) > 2 * math.log(y.size)


def _fits(y: np.ndarray, x: np.ndarray) -> tuple[int, float, float, float] | None:
    """The best split's index and the residual sums of one level, two levels and a line
    (None below SPLIT_MIN retrainings)."""
    n = y.size
    if n < SPLIT_MIN:
        return None
    cs, cs2 = np.cumsum(y), np.cumsum(y * y)
    k = np.arange(SPLIT_SIDE, n - SPLIT_SIDE + 1)
    left = cs2[k - 1] - cs[k - 1] ** 2 / k
    right = (cs2[-1] - cs2[k - 1]) - (cs[-1] - cs[k - 1]) ** 2 / (n - k)
    rss = left + right
    best = int(np.argmin(rss))
    floor = 1e-12 * max(float(cs2[-1]), 1.0)
    rss_one = float(((y - y.mean()) ** 2).sum())
    rss_two = max(float(rss[best]), floor)
    slope, intercept = np.polyfit(x - x.mean(), y, 1) if np.ptp(x) > 0 else (0.0, y.mean())
    rss_line = float(((y - intercept - slope * (x - x.mean())) ** 2).sum())
    return int(k[best]), max(rss_one, floor), rss_two, max(rss_line, floor)


def theil_sen(y: np.ndarray, x: np.ndarray) -> tuple[float, float]:
    """Theil-Sen slope (median of pairwise slopes) of ``y`` on ``x`` and its standard
    error from the spread of the residuals around it (sqrt(RSS / (n - 2) / Sxx)). Check: y =
    ln(100 x 1.02^w) at x = 7w days gives ln(1.02) / 7 exactly, error 0."""
    i, j = np.triu_indices(x.size, 1)
    dx = x[j] - x[i]
    ok = dx > 0
    if not ok.any():
        return 0.0, 0.0
    slope = float(np.median((y[j] - y[i])[ok] / dx[ok]))
    resid = y - slope * x
    resid = resid - np.median(resid)
    scale = math.sqrt(float((resid**2).sum()) / max(x.size - 2, 1))
    sxx = float(((x - x.mean()) ** 2).sum())
    return slope, scale / math.sqrt(sxx) if sxx > 0 else 0.0


def fit(
    costs: Sequence[float],
    extras: Sequence[float],
    days: Sequence[float],
    declared: Sequence[tuple[float, str]] = (),
    prior: OrgPrior = FIXED_PRIOR,
) -> CostModel:
    """The cost model of a series (the module doc's steps). ``declared``: (day,
    description) of each declared change."""
    c, e, d = (np.asarray(v, dtype=float) for v in (costs, extras, days))
    if c.size == 0 or e.size != c.size or d.size != c.size:
        raise PlanningError("cost series: costs, extras and days of equal, non-zero length")
    if not (np.all(np.isfinite(c)) and np.all(c >= 0) and np.all((e >= 0) & (e <= c))):
        raise PlanningError("cost series: costs finite and >= 0, extras between 0 and the cost")
    base = c - e
    y = np.log(np.maximum(base, 1e-9 * max(float(c.max()), 1e-9)))
    start, change = _latest_change(y, d, declared)
    c, base, y, d = c[start:], base[start:], y[start:], d[start:]
    slope, se = _slope(y, d, prior)
    # The level is read at the window's middle day, where the slope's error moves it
    # least; a future retraining's distance from there carries that error.
    anchor = float(d.mean())
    shift = np.exp(-slope * (d - anchor))
    n = c.size
    borrow = 1.0 if n < FEW else (SPREAD_WEIGHT / (n + SPREAD_WEIGHT) if n < BORROW_BELOW else 0.0)
    share, ratio = _tail(c - base, base, prior)
    model = CostModel(base * shift, anchor, slope, se, borrow, share, ratio, prior, change, ())
    return _with_sentences(model)


def _slope(y: np.ndarray, d: np.ndarray, prior: OrgPrior) -> tuple[float, float]:
    """The slope used and its standard error: the window's Theil-Sen slope (from
    TREND_MIN retrainings) shrunk toward the organisation's by their precisions, used
    only when clearly non-zero (|slope| > TREND_Z x se, or the organisation's pipelines
    clearly share a trend) and over 1% a month."""
    own, own_se = theil_sen(y, d) if y.size >= TREND_MIN else (0.0, math.inf)
    if math.isfinite(own_se) and step_like(y, d):
        own, own_se = 0.0, math.inf  # a step not clear enough to split on: no trend
    if own_se == 0.0:
        return own, 0.0  # an exact line: nothing to shrink
    w_org = 1.0 / prior.slope_spread**2 if prior.pipelines > 1 else 0.0
    w_own = 1.0 / own_se**2 if math.isfinite(own_se) else 0.0
    if w_org + w_own == 0.0:
        return 0.0, 0.0
    slope = (w_own * own + w_org * prior.slope) / (w_own + w_org)
    se = 1.0 / math.sqrt(w_own + w_org)
    clear = abs(slope) > TREND_Z * se or (w_org > 0 and prior.clear_trend)
    if clear and abs(slope) * DAYS_PER_MONTH > 0.01:
        return slope, se
    return 0.0, 0.0


def _tail(extras: np.ndarray, bases: np.ndarray, prior: OrgPrior) -> tuple[float, float]:
    """Share of retrainings needing extra attempts and their extra over the mean base,
    the window's shrunk toward the prior's: (k + w p) / (n + w) and (sum of ratios + w_r
    r) / (k + w_r), w the prior's ``tail_weight``, w_r 1 (0 for the fixed prior: a
    pipeline alone keeps its own tail, so its mean cost is its window's mean exactly)."""
    level = float(bases.mean())
    has = extras > 0
    k, n = int(has.sum()), extras.size
    weight = prior.tail_weight if prior.pipelines > 1 else 0.0
    share = (k + weight * prior.tail_share) / (n + weight)
    ratios = float(extras[has].sum()) / level if level > 0 else 0.0
    ratio_weight = 1.0 if prior.pipelines > 1 else 0.0
    ratio = (
        (ratios + ratio_weight * prior.tail_ratio) / (k + ratio_weight) if k else prior.tail_ratio
    )
    return share, ratio


def _latest_change(
    y: np.ndarray, d: np.ndarray, declared: Sequence[tuple[float, str]]
) -> tuple[int, Change | None]:
    """Where the window starts, and the change that starts it."""
    past = [(day, text) for day, text in declared if day <= d[-1]]
    start, change = 0, None
    if past:
        day, text = max(past)
        start = int(np.searchsorted(d, day, side="left"))
        change = Change(day, _ratio(y, start), True, text)
    found = find_split(y[start:], d[start:])
    if found is not None:
        start += found
        change = Change(float(d[start]), _ratio(y, start), False)
    return start, change


def _ratio(y: np.ndarray, at: int) -> float:
    if at <= 0 or at >= y.size:
        return 1.0
    return math.exp(float(np.median(y[at:]) - np.median(y[:at])))


def _with_sentences(model: CostModel) -> CostModel:
    """The model with the words the page and the API show for it."""
    out = []
    n = model.size
    if model.change is not None:
        ch = model.change
        moved = "fell" if ch.ratio < 1 else "rose"
        when = datetime.fromtimestamp(ch.day * SECONDS_PER_DAY, UTC).strftime("%b %-d")
        what = f"the change on {when}" if ch.declared else f"a change found in the costs on {when}"
        if ch.declared and ch.description:
            what += f" ({ch.description})"
        out.append(
            f"Costs {moved} {abs(ch.ratio - 1):.0%} after {what}; the forecast uses the "
            f"{n} retraining{'s' if n != 1 else ''} since."
        )
    if model.slope != 0.0:
        monthly = math.expm1(model.slope * DAYS_PER_MONTH)
        moved = "rose" if monthly > 0 else "fell"
        out.append(
            f"Costs {moved} {abs(monthly):.0%} a month over the last {n} retrainings; "
            "the forecast follows the trend."
        )
    if model.borrow > 0:
        source = (
            f"the organisation's other {model.prior.pipelines - 1} pipelines"
            if model.prior.pipelines > 1
            else "a fixed prior (no other pipelines to learn from)"
        )
        out.append(
            f"Only {n} retraining{'s' if n != 1 else ''} to learn from: the spread and how "
            f"often a retraining needs extra attempts are borrowed from {source} "
            f"({model.borrow:.0%} weight)."
        )
    return CostModel(**{**model.__dict__, "sentences": tuple(out)})
