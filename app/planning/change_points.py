"""Where a cost series changed, and whether it trends (docs/methodology.md 5.8).

A split is clear when two levels of log base cost explain the costs clearly better than
one level and better than a straight trend: n log(RSS_one / RSS_two) > SPLIT_PENALTY +
3 log n, searched by binary segmentation (the best split, then again in the part after
it). Where the latest change is, is weighed rather than decided: each possible start's
posterior probability (:func:`start_weights`). The trend is the Theil-Sen slope (the
median of the pairwise slopes).
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

SPLIT_PENALTY = 6.0
SPLIT_MIN = 8  # no split is searched in fewer retrainings
SPLIT_SIDE = 2  # retrainings at least on each side of a found split
MIN_STEP = 0.10  # a found split moves the level by at least 10%


def find_split(y: np.ndarray, x: np.ndarray) -> int | None:
    """The first index after the latest clear level shift of ``y`` (log base costs at
    days ``x``), or None: binary segmentation, each split tested against one level and
    against a straight line. Check: (0, 0, 0, 0, 0, 0, ln .65 x 4 ...) splits at 6."""
    found = find_splits(y, x)
    return found[-1] if found else None


def find_splits(y: np.ndarray, x: np.ndarray) -> list[int]:
    """Every clear split :func:`find_split` passes on its way to the latest, in order."""
    start = 0
    found: list[int] = []
    while True:
        k = _best_split(y[start:], x[start:])
        if k is None:
            return found
        start += k
        found.append(start)


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


def start_weights(
    y: np.ndarray, x: np.ndarray, spread: tuple[float, float], change_rate: float
) -> tuple[np.ndarray, np.ndarray]:
    """Where the level of ``y`` (log base costs at days ``x``) may last have changed, and
    how likely each is: the starts (0 for no change, then each split position) and their
    posterior probabilities, a change having been ``change_rate`` likely before the
    costs were read (:func:`evidence`). Below SPLIT_MIN retrainings: no change,
    certainly. Check: twelve log costs (0 x 8, 0.3 x 4), a prior spread 0.1 counting 4
    degrees of freedom: s^2 = 0.04 / 14 = 1/350; the split at 8 leaves no residual, the
    split at 7 RSS = 5 x 1/5 x 4/5 x 0.09 = 0.072, so its weight is e^-(0.072 x 175) =
    e^-12.6 of the split at 8's (tests/planning/test_change_points.py)."""
    found = evidence(y, x, spread)
    if found is None:
        return np.zeros(1, dtype=int), np.ones(1)
    starts, logs = found
    rate = min(max(change_rate, 1e-9), 1 - 1e-9)
    logs = logs + np.where(starts > 0, math.log(rate), math.log1p(-rate))
    weights = np.exp(logs - logs.max())
    return starts, weights / weights.sum()


def change_evidence(y: np.ndarray, x: np.ndarray, spread: tuple[float, float]) -> float | None:
    """ln of the Bayes factor of a change against none in ``y`` (``spread`` as in
    :func:`evidence`), for the organisation's rate of changes; None below SPLIT_MIN
    retrainings."""
    found = evidence(y, x, spread)
    if found is None:
        return None
    logs = found[1]
    top = float(logs[1:].max())
    if not math.isfinite(top):
        return -math.inf  # no split moves the level by MIN_STEP
    return top + math.log(float(np.exp(logs[1:] - top).sum())) - float(logs[0])


def evidence(
    y: np.ndarray, x: np.ndarray, spread: tuple[float, float]
) -> tuple[np.ndarray, np.ndarray] | None:
    """The starts (0, then each split position) and ln of each model's marginal
    likelihood, by BIC with the spread s known: ln m = -RSS / 2s^2 - p/2 ln n. No change
    is one level (p = 1) or a line (p = 2), half each; a change is two levels (p = 2)
    at one of the K positions, 1/K each, that moves the level by at least MIN_STEP
    (else -inf). s^2 pools the best model's residual variance (n - 2 degrees of
    freedom) with ``spread`` = (a prior's spread, its degrees of freedom): one window
    alone knows its spread too roughly to judge its steps by."""
    scan = _scan(y, x)
    if scan is None:
        return None
    k, rss, rss_one, rss_line, step = scan
    n, log_n = y.size, math.log(y.size)
    prior_spread, prior_dof = spread
    own = min(float(rss.min()), rss_line)
    var = max((own + prior_dof * prior_spread**2) / (n - 2 + prior_dof), 1e-12)
    none = np.logaddexp(-rss_one / (2 * var) - 0.5 * log_n, -rss_line / (2 * var) - log_n)
    splits = -rss / (2 * var) - log_n - math.log(k.size)
    splits = np.where(step > math.log1p(MIN_STEP), splits, -np.inf)
    return np.concatenate(([0], k)), np.concatenate(([none + math.log(0.5)], splits))


def _fits(y: np.ndarray, x: np.ndarray) -> tuple[int, float, float, float] | None:
    """The best split's index and the residual sums of one level, two levels and a line
    (None below SPLIT_MIN retrainings)."""
    scan = _scan(y, x)
    if scan is None:
        return None
    k, rss, rss_one, rss_line, _ = scan
    best = int(np.argmin(rss))
    return int(k[best]), rss_one, float(rss[best]), rss_line


Scan = tuple[np.ndarray, np.ndarray, float, float, np.ndarray]


def _scan(y: np.ndarray, x: np.ndarray) -> Scan | None:
    """Every split position k, the residual sum of two levels split there and the step
    between them (in log), and the residual sums of one level and of a line; each sum
    at least a floor in float noise (None below SPLIT_MIN retrainings). A forecast
    scans the same retrainings up to three times (the splits, their weights, whether a
    slope is a step), so the scans are remembered by value."""
    if y.size < SPLIT_MIN:
        return None
    return _scan_of(np.asarray(y, dtype=float).tobytes(), np.asarray(x, dtype=float).tobytes())


@lru_cache(maxsize=256)
def _scan_of(y_bytes: bytes, x_bytes: bytes) -> Scan:
    y, x = np.frombuffer(y_bytes), np.frombuffer(x_bytes)
    n = y.size
    cs, cs2 = np.cumsum(y), np.cumsum(y * y)
    k = np.arange(SPLIT_SIDE, n - SPLIT_SIDE + 1)
    left_sum, right_sum = cs[k - 1], cs[-1] - cs[k - 1]
    left = cs2[k - 1] - left_sum**2 / k
    right = (cs2[-1] - cs2[k - 1]) - right_sum**2 / (n - k)
    floor = 1e-12 * max(float(cs2[-1]), 1.0)
    rss = np.maximum(left + right, floor)
    step = np.abs(right_sum / (n - k) - left_sum / k)
    centred = y - y.mean()
    rss_one = float((centred**2).sum())
    xc = x - x.mean()
    sxx = float((xc**2).sum())
    # Least squares in closed form: RSS_line = RSS_one - Sxy^2 / Sxx.
    rss_line = rss_one - float((xc * centred).sum()) ** 2 / sxx if sxx > 0 else rss_one
    for shared in (k, rss, step):
        shared.flags.writeable = False  # remembered: no caller may change them
    return k, rss, max(rss_one, floor), max(rss_line, floor), step


def theil_sen(y: np.ndarray, x: np.ndarray) -> tuple[float, float]:
    """Theil-Sen slope (median of pairwise slopes) of ``y`` on ``x`` and its standard
    error from the spread of the residuals around it (sqrt(RSS / (n - 2) / Sxx)). Check: y =
    ln(100 x 1.02^w) at x = 7w days gives ln(1.02) / 7 exactly, error 0."""
    i, j = _pairs(x.size)
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


@lru_cache(maxsize=64)
def _pairs(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Every pair i < j of n indices (np.triu_indices, read-only: it is remembered)."""
    i, j = np.triu_indices(n, 1)
    i.flags.writeable = j.flags.writeable = False
    return i, j
