"""The month's bill from a :class:`~app.planning.cost_series.CostModel` (methodology.md,
"Costs move"): the bill of :mod:`app.planning.bill` with each future retraining priced at
its own date, small windows drawing part of their months from the organisation's prior,
and an uncertain change point read as a mixture of the windows it leaves open.

Per draw d, first its window (the model's hypotheses, each its weight's share of the
draws), then per future retraining j (day ``future_days[j]``):

- a base cost: from the widened bootstrap of the window's base costs (as
  :func:`app.planning.bill.bill_draws`) or, for a share ``borrow`` of the draws (all the
  month's retrainings together: they share the window's level and its error), level_d x
  exp(s z - s^2/2), level_d = mean base x exp(s z_d / sqrt(n) - s^2 / 2n) (the level's
  own uncertainty), s the spread pooled with the organisation's;
- times 1 + ``tail_ratio`` with probability ``tail_share`` (extra attempts);
- times exp(beta_d x (day_j - anchor)), beta_d ~ N(slope, se^2) (the slope's uncertainty).

E[B] is exact, not read from the draws: per retraining E[cost] = mean base x (1 + tail
share x tail ratio), times E[exp(beta dt)] = exp(slope dt + se^2 dt^2 / 2), summed over
the retrainings the month may hold, and weighed over the windows.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from app.planning.bill import (
    DEFAULT_DRAWS,
    BillForecast,
    FailureWindow,
    bill_quantiles,
    forecast_bill,
    p_exceeds,
    widened,
)
from app.planning.cost_series import FIXED_PRIOR, CostModel, OrgPrior, fit
from app.planning.model import PlanningError
from app.planning.schedule import RunsInMonth, typical_month_runs


def trend_factors(model: CostModel, future_days: Sequence[float]) -> np.ndarray:
    """E[exp(beta x (day - anchor))] for each future day (all 1 without a trend)."""
    dt = np.asarray(future_days, dtype=float) - model.anchor_day
    return np.exp(model.slope * dt + 0.5 * (model.slope_se * dt) ** 2)


def expected_bill(model: CostModel, runs: RunsInMonth, future_days: Sequence[float]) -> float:
    """E[B], exact: over the windows the model weighs (one unless a change is uncertain),
    the weighted sum of their expected bills. Check: the twelve costs growing 2% a week
    (weeks 0-11), four more weekly: 100 x (1.02^12 + ... + 1.02^15) = $522.72."""
    return math.fsum(h.weight * _expected(h, runs, future_days) for h in model.hypotheses)


def _expected(model: CostModel, runs: RunsInMonth, future_days: Sequence[float]) -> float:
    factors = trend_factors(model, future_days)
    cumulative = np.concatenate(([0.0], np.cumsum(factors)))
    per_count = [cumulative[k] for k in runs.counts]
    terms = zip(runs.probabilities, per_count, strict=True)
    return model.mean_cost() * math.fsum(p * s for p, s in terms)


def mean_cost(model: CostModel) -> float:
    """E[a retraining's cost] at each window's middle day, weighed over the windows."""
    return math.fsum(h.weight * h.mean_cost() for h in model.hypotheses)


def series_draws(
    model: CostModel,
    runs: RunsInMonth,
    future_days: Sequence[float],
    *,
    draws: int = DEFAULT_DRAWS,
    seed: int = 0,
) -> np.ndarray:
    """``draws`` simulated bills (the module doc's steps), vectorised in one pass over
    every window the model weighs: each window takes its weight's share of the draws
    (:func:`_shares`), and all the retrainings of a draw come from its window, so they
    share its level and that level's error. Over several windows the bills are then
    shuffled, so that no draw's place says which window it came from (the org plan adds
    pipelines' draws place by place)."""
    most = int(max(runs.counts))
    if draws < 1:
        raise PlanningError("draws must be >= 1")
    if len(future_days) < most:
        raise PlanningError("a future day for every retraining the month may hold")
    if most == 0:
        return np.zeros(draws)
    rng = np.random.default_rng(seed)
    hyps = model.hypotheses
    shares = _shares(hyps, draws)
    cost = _resampled(hyps, shares, most, rng)
    counts = rng.choice(np.asarray(runs.counts), p=np.asarray(runs.probabilities), size=draws)
    borrow, share, ratio, slope, slope_se, anchor = _columns(
        [(h.borrow, h.tail_share, h.tail_ratio, h.slope, h.slope_se, h.anchor_day) for h in hyps],
        shares,
    )
    if model.borrows:
        borrowed = _borrowed(hyps, shares, rng, cost.shape)
        cost = np.where(rng.random((draws, 1)) < borrow, borrowed, cost)
    cost = cost * (1.0 + (rng.random((draws, most)) < share) * ratio)
    if any(h.slope != 0.0 for h in hyps):
        beta = slope + slope_se * rng.standard_normal((draws, 1))
        cost = cost * np.exp(beta * (np.asarray(future_days[:most], dtype=float) - anchor))
    taken = np.arange(most)[None, :] < counts[:, None]
    bills = np.asarray(np.einsum("ij,ij->i", cost, taken.astype(float)))
    return bills if len(hyps) == 1 else np.asarray(rng.permutation(bills))


def _shares(hyps: Sequence[CostModel], draws: int) -> np.ndarray:
    """How many draws each window takes: its weight's share, largest remainders."""
    if len(hyps) == 1:
        return np.array([draws])
    weights = np.array([h.weight for h in hyps])
    shares: np.ndarray = np.floor(weights * draws).astype(np.intp)
    extra = np.argsort(shares - weights * draws, kind="stable")[: draws - int(shares.sum())]
    shares[extra] += 1
    return shares


def _columns(rows: Sequence[tuple[float, ...]], shares: np.ndarray) -> list[np.ndarray]:
    """Each number of the windows' ``rows`` as a column, one row per draw (its
    window's); one window: a 1 x 1 column that broadcasts."""
    table = np.asarray(rows, dtype=float)
    if len(rows) > 1:
        table = np.repeat(table, shares, axis=0)
    return [table[:, i : i + 1] for i in range(table.shape[1])]


def _resampled(
    hyps: Sequence[CostModel], shares: np.ndarray, most: int, rng: np.random.Generator
) -> np.ndarray:
    """Per draw, ``most`` costs: its window widened and resampled with replacement (the
    window's own uncertainty), then the costs drawn from that resample: positions in
    one span, the windows' sizes' least common multiple, taken modulo each draw's
    window size (so uniform on each) in one call whatever the windows."""
    kept = [(h, int(k)) for h, k in zip(hyps, shares, strict=True) if k]
    resamples = [rng.integers(0, h.size, size=(k, h.size)) for h, k in kept]
    span = math.lcm(*(h.size for h, _ in kept))
    positions = rng.integers(0, span, size=(int(shares.sum()), most))
    out, row = [], 0
    for (h, k), resample in zip(kept, resamples, strict=True):
        at = positions[row : row + k] if span == h.size else positions[row : row + k] % h.size
        out.append(widened(h.bases)[np.take_along_axis(resample, at, axis=1)])
        row += k
    return out[0] if len(out) == 1 else np.concatenate(out)


def _borrowed(
    hyps: Sequence[CostModel], shares: np.ndarray, rng: np.random.Generator, shape: tuple[int, int]
) -> np.ndarray:
    """Costs drawn from the spread pooled with the prior's around each window's level,
    itself uncertain by s / sqrt(n); both lognormal with their means kept."""
    s, n, mean = _columns(
        [
            (h.borrowed_spread() if h.borrow > 0 else 0.0, h.size, float(h.bases.mean()))
            for h in hyps
        ],
        shares,
    )
    level = mean * np.exp(s / np.sqrt(n) * rng.standard_normal((shape[0], 1)) - s * s / (2 * n))
    return np.asarray(level * np.exp(s * rng.standard_normal(shape) - s * s / 2))


def forecast_series(
    model: CostModel,
    runs: RunsInMonth,
    future_days: Sequence[float],
    *,
    budget_usd: float | None = None,
    draws: int = DEFAULT_DRAWS,
    seed: int = 0,
) -> BillForecast:
    """The month's bill from the cost model, its retrainings at ``future_days`` (at
    least as many as the month may hold), as a :class:`BillForecast` whose
    ``sentences`` say when a change, a trend or borrowed spread was used."""
    if budget_usd is not None and not (math.isfinite(budget_usd) and budget_usd >= 0):
        raise PlanningError("budget must be >= 0")
    simulated = series_draws(model, runs, future_days, draws=draws, seed=seed)
    expected = expected_bill(model, runs, future_days)
    mean = mean_cost(model)
    median = float(np.median(model.bases))
    lo, mid, hi = bill_quantiles(simulated)
    p_over = p_exceeds(simulated, budget_usd)
    working = [
        f"Runs in the month: {runs.describe()}.",
        f"{_window_words(model)}, mean ${mean:,.2f} at the middle day, typical (median) "
        f"${median:,.2f}.",
        f"Expected bill ${expected:,.2f}; {draws} draws (seed {seed}): p10 ${lo:,.0f}, "
        f"p50 ${mid:,.0f}, p90 ${hi:,.0f}.",
        *model.sentences,
    ]
    if p_over is not None:
        working.append(f"P(bill > ${budget_usd:,.0f} budget) = {p_over:.1%}.")
    summary = (runs, runs.mean, model.size, mean, median, expected, lo, mid, hi)
    return BillForecast(
        *summary, budget_usd, p_over, seed, tuple(working), simulated, model.sentences
    )


def _window_words(model: CostModel) -> str:
    """ "Window: 12 retrainings since the latest change", or the windows weighed."""
    if not model.others:
        return f"Window: {model.size} retrainings since the latest change"
    each = " and ".join(f"{h.size} ({h.weight:.0%})" for h in model.hypotheses)
    return f"Windows weighed: the last {each} retrainings"


def schedule_days(
    newest_day: float, runs_per_week: float, now_day: float, count: int
) -> list[float]:
    """The days of the next ``count`` scheduled retrainings: every 7/k days after the
    newest one, the first at or after ``now_day`` (a start at now still counts, as
    ``app.planning.schedule.scheduled_starts`` counts it). Check: newest on day 0,
    1/week, now day 10, 3 more: days 14, 21, 28; now day 7: days 7, 14, 21."""
    if count <= 0 or runs_per_week <= 0:
        return []
    gap = 7.0 / runs_per_week
    first = max(math.ceil((now_day - newest_day) / gap - 1e-9), 1)
    return [newest_day + gap * (first + i) for i in range(count)]


@dataclass(frozen=True)
class SeriesContext:
    """What a projection needs to read its window as a series: each window retraining's
    start day (in the window's order), the retrainings abandoned after failed attempts
    as (cost, extra, day), the declared changes (day, description), the organisation's
    prior and today's day (the typical month starts then)."""

    days: tuple[float, ...]
    abandoned: tuple[tuple[float, float, float], ...] = ()
    declared: tuple[tuple[float, str], ...] = ()
    prior: OrgPrior = FIXED_PRIOR
    now_day: float = 0.0

    def model(self, costs: Sequence[float], bases: Sequence[float]) -> CostModel:
        """The cost model of the window (``costs`` with their ``bases``, the cost without
        extra attempts) and the abandoned retrainings, oldest first."""
        rows = [(d, c, c - b) for d, c, b in zip(self.days, costs, bases, strict=True)]
        rows += [(d, c, e) for c, e, d in self.abandoned]
        rows.sort(key=lambda row: row[0])
        extras = [min(max(e, 0.0), c) for _, c, e in rows]
        days = [row[0] for row in rows]
        return fit([row[1] for row in rows], extras, days, self.declared, self.prior)


def typical_month(
    model: CostModel,
    runs: RunsInMonth,
    runs_per_week: float,
    now_day: float,
    *,
    budget_usd: float | None,
    seed: int,
) -> BillForecast:
    """The bill of a typical month at ``runs_per_week`` starting today: its retrainings
    every 7/k days from today, each priced at its own date."""
    future = typical_days(runs, runs_per_week, now_day)
    return forecast_series(model, runs, future, budget_usd=budget_usd, seed=seed)


def typical_days(runs: RunsInMonth, runs_per_week: float, now_day: float) -> list[float]:
    """The days of a typical month's retrainings: every 7/k days after ``now_day``, as
    many as the month may hold. Check: 2/week from day 10, up to 9: 13.5, 17, ..., 41.5."""
    gap = 7.0 / runs_per_week if runs_per_week > 0 else 0.0
    return [now_day + gap * (j + 1) for j in range(max(runs.counts))]


def typical_expected_bill(
    model: CostModel, runs_per_week: float, now_day: float, convention: str
) -> float:
    """E[B] of a typical month at ``runs_per_week`` starting on ``now_day``: the expected
    bill of :func:`typical_month`, exact and without draws (what the org-wide pages show
    for each pipeline, the projection's figure at that cadence)."""
    runs = typical_month_runs(runs_per_week, convention)
    return expected_bill(model, runs, typical_days(runs, runs_per_week, now_day))


def biller(
    window: list[float] | FailureWindow,
    adjusted_costs: Sequence[float],
    series: SeriesContext | None,
    convention: str,
    budget_usd: float | None,
    seed: int,
    warnings: list[str],
) -> Callable[[float], BillForecast]:
    """A projection's bill at k runs a week: the window read as a cost series when
    ``series`` is given (its sentences added to ``warnings``), else the plain window of
    :func:`app.planning.bill.forecast_bill` (and always with a failure model, whose
    draws are each retraining's failures, not a series). ``adjusted_costs``: each
    retraining's cost without its failed attempts, under the what-ifs."""
    if series is None or isinstance(window, FailureWindow):
        return lambda k: forecast_bill(
            window, typical_month_runs(k, convention), budget_usd=budget_usd, seed=seed
        )
    model = series.model(window, adjusted_costs)
    warnings.extend(model.sentences)
    return lambda k: typical_month(
        model,
        typical_month_runs(k, convention),
        k,
        series.now_day,
        budget_usd=budget_usd,
        seed=seed,
    )
