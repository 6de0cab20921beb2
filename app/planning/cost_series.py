"""The series of retraining costs as the forecast reads it (docs/methodology.md, "Costs move").

Input: a pipeline's retraining costs, oldest first, each with its start (days since the
epoch) and the part paid for extra attempts (failed attempts of the same retraining), and
the declared change times. Output (:class:`CostModel`): what the bill draws future
retraining costs from (:mod:`app.planning.series_bill`):

1. *Change point*: the window starts after the latest change. A declared one is
   certain; where the costs changed is weighed (:mod:`app.planning.change_points`, on
   log base cost, the cost without extra attempts, so a rare rerun is not a change):
   each possible start (none, or a split at each retraining) by how well it explains
   the costs and by how often the organisation's windows changed. The likeliest
   :data:`MOST_STARTS` starts above :data:`MIN_WEIGHT` are kept, each a window with its
   weight (``CostModel.others``): the bill draws from each in proportion.
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
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime

import numpy as np

from app.planning.change_points import find_split, find_splits, start_weights, step_like, theil_sen
from app.planning.model import PlanningError
from app.planning.org_prior import FIXED_PRIOR, PRIOR_WEIGHT, TREND_Z, OrgPrior, org_prior

__all__ = ["FIXED_PRIOR", "CostModel", "OrgPrior", "days_of", "find_split", "fit", "org_prior"]

SECONDS_PER_DAY = 86_400.0
DAYS_PER_MONTH = 30.436875  # 365.2425 / 12
TREND_MIN = 8
BORROW_BELOW = 10
FEW = 3
SPREAD_WEIGHT = 8.0  # the prior's spread counts as this many retrainings
MIN_WEIGHT = 0.10  # a start less likely than this is left out (the rest reweighed)
MOST_STARTS = 2  # the likeliest starts kept: each is a window the bill draws from


@dataclass(frozen=True)
class Change:
    """The latest change: its day, the level ratio after / before, declared or found."""

    day: float
    ratio: float
    declared: bool
    description: str = ""
    # How likely the costs make it: 1 for a declared change, or a clear split before the
    # latest; a latest change found in the costs is as likely as its window's weight.
    likely: float = 1.0


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
    # How likely this window's start is, and the other starts the costs leave open
    # (each a CostModel with its own weight; the weights sum to 1): a change found in
    # the costs is rarely certain, so the bill is a mixture over where it happened.
    weight: float = 1.0
    others: tuple[CostModel, ...] = ()

    @property
    def size(self) -> int:
        return int(self.bases.size)

    @property
    def hypotheses(self) -> tuple[CostModel, ...]:
        """This window and the others the costs leave open, most likely first."""
        return (self, *self.others)

    @property
    def borrows(self) -> bool:
        """Whether any window the forecast weighs borrows spread from the prior."""
        return any(h.borrow > 0 for h in self.hypotheses)

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
    models = [
        _window(c[at:], base[at:], y[at:], d[at:], prior, change, weight)
        for at, change, weight in _starts(y, d, declared, prior)
    ]
    return _with_sentences(models[0], tuple(models[1:]))


def _window(
    c: np.ndarray,
    base: np.ndarray,
    y: np.ndarray,
    d: np.ndarray,
    prior: OrgPrior,
    change: Change | None,
    weight: float,
) -> CostModel:
    """The model of the window since one change (``c``, ``base``, ``y`` its log, ``d``
    start there)."""
    slope, se = _slope(y, d, prior)
    # The level is read at the window's middle day, where the slope's error moves it
    # least; a future retraining's distance from there carries that error.
    anchor = float(d.mean())
    shift = np.exp(-slope * (d - anchor))
    n = c.size
    borrow = 1.0 if n < FEW else (SPREAD_WEIGHT / (n + SPREAD_WEIGHT) if n < BORROW_BELOW else 0.0)
    share, ratio = _tail(c - base, base, prior)
    return CostModel(
        base * shift, anchor, slope, se, borrow, share, ratio, prior, change, (), weight
    )


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


def _starts(
    y: np.ndarray, d: np.ndarray, declared: Sequence[tuple[float, str]], prior: OrgPrior
) -> list[tuple[int, Change | None, float]]:
    """Where the window may start, the change that starts it and how likely it is, most
    likely first. The latest declared change is certain, and so is each clear split
    found before the latest one; from there (``settled``) the latest change is weighed
    (:func:`app.planning.change_points.start_weights`): none, or a split at each
    position, those under MIN_WEIGHT left out and at most MOST_STARTS kept."""
    past = [(day, text) for day, text in declared if day <= d[-1]]
    settled, change = 0, None
    if past:
        day, text = max(past)
        settled = int(np.searchsorted(d, day, side="left"))
        change = Change(day, _ratio(y, settled), True, text)
    found = find_splits(y[settled:], d[settled:])
    if len(found) >= 2:
        settled += found[-2]
        change = Change(float(d[settled]), _ratio(y, settled), False)
    spread = (prior.log_spread, PRIOR_WEIGHT)
    starts, weights = start_weights(y[settled:], d[settled:], spread, prior.change_rate)
    order = np.argsort(-weights, kind="stable")[:MOST_STARTS]
    kept = [int(i) for i in order if weights[i] >= MIN_WEIGHT]
    total = math.fsum(float(weights[i]) for i in kept)
    out: list[tuple[int, Change | None, float]] = []
    for i in kept:
        at, weight = settled + int(starts[i]), float(weights[i]) / total
        if at != settled:
            out.append((at, Change(float(d[at]), _ratio(y, at), False, likely=weight), weight))
        else:
            out.append((at, change, weight))
    return out


def _ratio(y: np.ndarray, at: int) -> float:
    """The level after ``at`` over the level before: exp of the medians' difference
    (``statistics.median`` of a short window is np.median's value in a sixth the time)."""
    if at <= 0 or at >= y.size:
        return 1.0
    values = y.tolist()
    return math.exp(statistics.median(values[at:]) - statistics.median(values[:at]))


def _with_sentences(model: CostModel, others: tuple[CostModel, ...]) -> CostModel:
    """The model, with the ``others`` it weighs, and the words the page and the API show
    for them: the change it starts after (or the two starts it weighs), its trend, and
    what it borrows."""
    hyps = (model, *others)
    out = _change_words(model) if not others else _weighed_words(hyps)
    for h in hyps:
        if h.slope != 0.0:
            monthly = math.expm1(h.slope * DAYS_PER_MONTH)
            moved = "rose" if monthly > 0 else "fell"
            where = "" if len(hyps) == 1 else f"where it weighs them ({h.weight:.0%}), "
            out.append(
                f"Costs {moved} {abs(monthly):.0%} a month over the last {h.size} "
                f"retrainings; {where}the forecast follows the trend."
            )
    borrowing = next((h for h in hyps if h.borrow > 0), None)
    if borrowing is not None:
        out.append(_borrow_words(borrowing, len(hyps) > 1))
    return replace(model, others=others, sentences=tuple(out))


def _change_words(model: CostModel) -> list[str]:
    if model.change is None:
        return []
    n = model.size
    return [
        f"Costs {_moved(model.change)} after {_what(model.change)}; the forecast uses the "
        f"{n} retraining{'s' if n != 1 else ''} since."
    ]


def _weighed_words(hyps: tuple[CostModel, ...]) -> list[str]:
    """Two starts: a change found in the costs that may have happened, and either none
    since the settled change (or in the whole window) or a change at another date."""
    found = [h.change is not None and h.change.likely < 1.0 for h in hyps]
    new = [h for h, f in zip(hyps, found, strict=True) if f]
    if len(new) == 2:
        (a, b), ch = new, new[0].change
        assert ch is not None and b.change is not None
        return [
            f"Costs {_moved(ch)} after a change found in the costs on {_day(ch)} "
            f"({a.weight:.0%} likely) or {_day(b.change)} ({b.weight:.0%}); the forecast "
            f"weighs the {a.size} and the {b.size} retrainings since."
        ]
    (later,), (settled,) = new, [h for h, f in zip(hyps, found, strict=True) if not f]
    ch, before = later.change, settled.change
    assert ch is not None
    out = [] if before is None else [f"Costs {_moved(before)} after {_what(before)}."]
    since = f"the {settled.size} since it" if before else f"all {settled.size}"
    out.append(
        f"Costs may have {_moved(ch, perfect=True)} on {_day(ch)}: the costs make a change "
        f"then {later.weight:.0%} likely, so the forecast weighs the {later.size} "
        f"retraining{'s' if later.size != 1 else ''} since at {later.weight:.0%} and {since} "
        f"at {settled.weight:.0%}."
    )
    return out


def _moved(change: Change, *, perfect: bool = False) -> str:
    """ "fell 35%" (or "fallen 35%"), "rose 12%" ("risen 12%")."""
    words = ("fell", "fallen") if change.ratio < 1 else ("rose", "risen")
    word = words[perfect]
    return f"{word} {abs(change.ratio - 1):.0%}"


def _day(change: Change) -> str:
    return datetime.fromtimestamp(change.day * SECONDS_PER_DAY, UTC).strftime("%b %-d")


def _what(change: Change) -> str:
    if not change.declared:
        return f"a change found in the costs on {_day(change)}"
    what = f"the change on {_day(change)}"
    return f"{what} ({change.description})" if change.description else what


def _borrow_words(model: CostModel, weighed: bool) -> str:
    n = model.size
    where = ""
    if weighed:
        since = f"since {_day(model.change)}" if model.change else "in the window"
        where = f", where the forecast weighs the {n} {since} at {model.weight:.0%}"
    source = (
        f"the organisation's other {model.prior.pipelines - 1} pipelines"
        if model.prior.pipelines > 1
        else "a fixed prior (no other pipelines to learn from)"
    )
    return (
        f"Only {n} retraining{'s' if n != 1 else ''} to learn from: the spread and how "
        f"often a retraining needs extra attempts are borrowed from {source} "
        f"({model.borrow:.0%} weight{where})."
    )
