"""Where a cost series changed, and whether it trends (docs/methodology.md 5.8).

A split is found when two levels of log base cost explain the costs clearly better than
one level and better than a straight trend: n log(RSS_one / RSS_two) > SPLIT_PENALTY +
3 log n, searched by binary segmentation (the best split, then again in the part after
it). The trend is the Theil-Sen slope (the median of the pairwise slopes).
"""

from __future__ import annotations

import math

import numpy as np

SPLIT_PENALTY = 6.0
SPLIT_MIN = 8  # no split is searched in fewer retrainings
SPLIT_SIDE = 2  # retrainings at least on each side of a found split
MIN_STEP = 0.10  # a found split moves the level by at least 10%


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
    centred = y - y.mean()
    rss_one = float((centred**2).sum())
    rss_two = max(float(rss[best]), floor)
    xc = x - x.mean()
    sxx = float((xc**2).sum())
    # Least squares in closed form: RSS_line = RSS_one - Sxy^2 / Sxx.
    rss_line = rss_one - float((xc * centred).sum()) ** 2 / sxx if sxx > 0 else rss_one
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
