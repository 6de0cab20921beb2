"""The series of retraining costs as the forecast reads it (docs/methodology.md, "Costs move").

Input: a pipeline's retraining costs, oldest first, each with its start (days since the
epoch) and the part paid for extra attempts (failed attempts of the same retraining), and
the declared change times. Output (:class:`CostModel`): what the bill draws future
retraining costs from (:mod:`app.planning.series_bill`):

1. *Change point*: the window starts after the latest change, declared or found. A split
   is found when two levels of log base cost (the cost without extra attempts, so a rare
   rerun is not a change) explain the costs clearly better than one level and better
   than a straight trend (:mod:`app.planning.change_points`).
2. *Trend*: Theil-Sen slope of log base cost on time over the window since the change,
   used only when clearly non-zero (|slope| > :data:`TREND_Z` standard errors, and at
   least :data:`TREND_MIN` retrainings); the window is then brought to its middle day
   (c x exp(-slope x (day - middle))) and each future retraining priced at its own
   date, the slope's standard error widening the band (more the further it is).
3. *Borrowed strength*: a window of n < :data:`BORROW_BELOW` retrainings since the
   change takes a share ``borrow`` = n0 / (n + n0) (n0 = :data:`SPREAD_WEIGHT`) of its
   draws from the organisation's prior (:mod:`app.planning.org_prior`: the spread of
   log cost around each pipeline's level, the tail of extra attempts, the trend); with
   fewer than :data:`FEW` retrainings, all of them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np

from app.planning.change_points import find_split, step_like, theil_sen
from app.planning.model import PlanningError
from app.planning.org_prior import FIXED_PRIOR, PRIOR_WEIGHT, TREND_Z, OrgPrior, org_prior

__all__ = ["FIXED_PRIOR", "CostModel", "OrgPrior", "days_of", "fit", "org_prior"]

SECONDS_PER_DAY = 86_400.0
DAYS_PER_MONTH = 30.436875  # 365.2425 / 12
TREND_MIN = 8
BORROW_BELOW = 10
FEW = 3
SPREAD_WEIGHT = 8.0  # the prior's spread counts as this many retrainings


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
