"""The month's bill as a distribution (docs/methodology.md §5.3).

A budget is a limit on a sum: the month's retraining costs. The forecast of that sum B:

1. take the variant's window of recent retraining costs c_1..c_n (what-ifs applied),
   its deviations from the mean stretched by :func:`spread_factor` (1.089 for n = 20
   normal costs, more for a heavy-tailed window: a window of n costs understates how
   much the next ones vary);
2. per draw, resample the window with replacement (the window's own uncertainty), draw
   N from the month's :class:`~app.planning.schedule.RunsInMonth`, then draw N costs
   from that resample and add them up;
3. repeat ``draws`` times (vectorised, seeded: the same inputs give the same figures).

The *expected bill* is not read from the draws: E[B] = E[N] x mean(c) exactly (a
bootstrap's expectation is the window mean), so it has no Monte Carlo noise and expected
bills add up (a portfolio's total is the sum of its pipelines'). p10/p50/p90 and
P(B > budget) come from the draws. The median retraining stays visible as "a typical
retraining costs $X", never as the monthly figure.

With a failure-rate what-if, each drawn retraining is its failure-free cost plus K
failures, K ~ Poisson(expected failures at the rate), each at the model's cost per
failure (:class:`FailureWindow`), instead of the failed attempts it recorded.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
from scipy.special import ndtri, stdtrit

from app.planning.failures import expected_loss_per_failure
from app.planning.model import PlanningError, RunFacts
from app.planning.schedule import RunsInMonth

DEFAULT_DRAWS = 2000


@dataclass(frozen=True)
class FailureWindow:
    """A window priced by the failure model instead of its recorded failures.

    Per retraining i: ``failure_free_usd[i]`` (what it costs without failures),
    ``expected_failures[i]`` (the Poisson mean at the what-if rate) and
    ``usd_per_failure[i]`` (what one failure costs). Build it with :func:`failure_window`.
    """

    failure_free_usd: tuple[float, ...]
    expected_failures: tuple[float, ...]
    usd_per_failure: tuple[float, ...]

    def __post_init__(self) -> None:
        n = len(self.failure_free_usd)
        if n == 0 or len(self.expected_failures) != n or len(self.usd_per_failure) != n:
            raise PlanningError("failure window: three equal-length, non-empty columns")
        for column in (self.failure_free_usd, self.expected_failures, self.usd_per_failure):
            if not all(math.isfinite(v) and v >= 0 for v in column):
                raise PlanningError("failure window: values must be finite and >= 0")

    @property
    def mean_cost_usd(self) -> float:
        """Mean expected retraining cost: mean(failure-free + expected failures x cost)."""
        terms = zip(
            self.failure_free_usd, self.expected_failures, self.usd_per_failure, strict=True
        )
        return math.fsum(c + k * f for c, k, f in terms) / len(self.failure_free_usd)


# Not called by the app: the library call docs/bill.md documents (tests/planning check it).
def failure_window(
    runs: Sequence[RunFacts],
    rate_per_instance_hour: float,
    *,
    checkpoint_interval_hours: float,
    resume_hours: float = 0.0,
    reschedule_hours: float = 0.0,
    price_per_gpu_hour: float | None = None,
) -> FailureWindow:
    """The failure model over each retraining's succeeded attempt (methodology.md §4).

    Per run: Weff = G / T; the failure-free wall clock T0 = T - sum(tch + trm + tre);
    failure-free cost = Weff x T0 x price; expected failures = lambda x Weff x T0 (each
    GPU counted as an instance, as the recorded rate is); one failure costs
    (interval / 2 + resume + reschedule) x Weff x price. The failed attempts a
    retraining recorded are left out: the model's failures replace them.
    Check: 8 workers x 10 h, G = 80, no interruptions, $2/GPU-h, lambda = 1e-3,
    interval 2 h, resume 0.5 h: failure-free $160, expected failures 0.08, $24 a
    failure; mean cost 160 + 0.08 x 24 = $161.92.
    """
    if not runs:
        raise PlanningError("no retrainings to price")
    if not (math.isfinite(rate_per_instance_hour) and rate_per_instance_hour >= 0):
        raise PlanningError("failure rate must be >= 0")
    per_failure_hours = expected_loss_per_failure(
        checkpoint_interval_hours, resume_hours, reschedule_hours
    )
    base, mu, per = [], [], []
    for run in runs:
        weff = run.effective_workers
        price = run.price_per_gpu_hour if price_per_gpu_hour is None else price_per_gpu_hour
        recorded = sum(i.total_hours for i in run.interruptions)
        t0 = max(run.wall_clock_hours - recorded, 0.0)
        base.append(weff * t0 * price)
        mu.append(rate_per_instance_hour * weff * t0)
        per.append(per_failure_hours * weff * price)
    return FailureWindow(tuple(base), tuple(mu), tuple(per))


@dataclass(frozen=True)
class BillForecast:
    """One month's bill forecast.

    ``expected_bill_usd`` = ``runs_in_month`` x ``mean_retraining_usd`` (exact);
    ``bill_p10/p50/p90_usd`` and ``p_over_budget`` (None without a budget) from the
    draws; ``typical_retraining_usd`` is the window's median retraining cost, for the
    sentence "a typical retraining costs $X". ``draws`` holds the simulated bills so a
    caller can add spend already made (app/planning/month_to_date.py).
    """

    runs: RunsInMonth
    runs_in_month: float
    window_size: int
    mean_retraining_usd: float
    typical_retraining_usd: float
    expected_bill_usd: float
    bill_p10_usd: float
    bill_p50_usd: float
    bill_p90_usd: float
    budget_usd: float | None
    p_over_budget: float | None
    seed: int
    working: tuple[str, ...]
    draws: np.ndarray = field(repr=False, compare=False)
    # What the forecast says in words when it follows a change, a trend or borrowed
    # spread (app/planning/cost_series.py); empty for a plain window.
    sentences: tuple[str, ...] = ()


def bill_quantiles(draws: np.ndarray) -> tuple[float, float, float]:
    """p10, p50, p90 of simulated bills: the smallest simulated bill b with at least
    q of the draws <= b (numpy's ``inverted_cdf``), so each is a bill that can occur."""
    # numpy's inverted_cdf by hand (the same float steps): index n q - 1, up to the next
    # whole one unless it is whole; one partition, a quarter of np.percentile's time
    # (tests/planning/test_bill.py holds them equal).
    n = draws.size
    at = [min(max(math.ceil(n * (p / 100) - 1), 0), n - 1) for p in (10.0, 50.0, 90.0)]
    lo, mid, hi = np.partition(draws, at)[at]
    return float(lo), float(mid), float(hi)


def p_exceeds(draws: np.ndarray, budget_usd: float | None) -> float | None:
    """Share of the simulated bills strictly above the budget (None without one)."""
    if budget_usd is None:
        return None
    return float(np.mean(draws > budget_usd))


def bill_draws(
    costs: Sequence[float] | FailureWindow,
    runs: RunsInMonth,
    *,
    draws: int = DEFAULT_DRAWS,
    seed: int = 0,
) -> np.ndarray:
    """``draws`` simulated month bills (the module doc's steps 1-3), as a numpy array.

    Vectorised: resample indices R (draws x n), run counts N per draw, positions P
    (draws x max N, drawn a retraining at a time) into each resample; bill = sum over
    the first N positions of cost[R[P]]. Positions, not fresh indices, so two draws of
    one resample may repeat a retraining, as drawing from the resample does.
    """
    base, mu, per = _columns(costs)
    if draws < 1:
        raise PlanningError("draws must be >= 1")
    n = base.size
    base = widened(base)
    rng = np.random.default_rng(seed)
    resample = rng.integers(0, n, size=(draws, n))
    counts = rng.choice(np.asarray(runs.counts), p=np.asarray(runs.probabilities), size=draws)
    most = int(max(runs.counts))
    if most == 0:
        return np.zeros(draws)
    # Drawn retraining by retraining (most x draws, then transposed) and last: a month
    # holding one more retraining adds a cost to every draw and changes none, so the
    # band never falls as the cadence rises (tests/planning/test_bill.py; a failure
    # model's counts, drawn after them, are not held to it).
    positions = rng.integers(0, n, size=(most, draws)).T
    chosen = np.take_along_axis(resample, positions, axis=1)
    taken = np.arange(most)[None, :] < counts[:, None]
    cost = base[chosen]
    if mu is not None and per is not None:
        cost = cost + rng.poisson(mu[chosen.T]).T * per[chosen]
    return np.asarray(np.einsum("ij,ij->i", cost, taken.astype(float)))


@lru_cache(maxsize=4096)
def spread_factor(n: int, excess_kurtosis: float = 0.0) -> float:
    """sqrt((n + 1)/(n - 1)) x t_0.9(df) / z_0.9: how far a window's deviations from its
    mean are stretched before resampling (1.089 for n = 20 with df = n - 1; 1 for n < 2).

    Drawing one cost from a resample of n values has variance (n - 1)/n x v on average
    (v = the window's variance with divisor n) and E[v] = (n - 1)/n x sigma^2, while a
    future retraining, its mean unknown, varies by sigma^2 (1 + 1/n): the square root
    closes that gap. The spread itself is estimated from n values, which the t quantile
    against the normal one allows for at the p90. Its degrees of freedom are
    Satterthwaite's, df = 2 / (2/(n - 1) + kappa/n): the sample variance of costs with
    excess kurtosis kappa varies by sigma^4 (2/(n - 1) + kappa/n), so a heavy-tailed
    window (failed attempts) knows its spread less well than a normal one. kappa below
    0 counts as 0 (df = n - 1: no window is taken to know its spread better than a
    normal one would). Normal costs: the p90 is exceeded in 10% of months; skewed costs
    with failures, 20-retraining windows: 12.2% (13.1% with df = n - 1, 15% without any
    stretch; tests/analytics/test_bill_calibration.py).
    """
    if n < 2:
        return 1.0
    kappa = max(excess_kurtosis, 0.0)
    df = 2.0 / (2.0 / (n - 1) + kappa / n)
    # The t and normal quantiles as scipy's ufuncs (a few microseconds; the
    # distribution objects' ppf took ~150: most of a forecast's time with a new df).
    ratio = float(stdtrit(df, 0.9)) / float(ndtri(0.9))
    return math.sqrt((n + 1) / (n - 1)) * ratio


def excess_kurtosis(costs: np.ndarray) -> float:
    """The window's sample excess kurtosis G2 (the bias-adjusted estimator; 0 for fewer
    than four costs or a spread within float noise of none), rounded to 0.01 so that
    :func:`spread_factor` is looked up, not recomputed, for the same window (the factor
    moves by < 1e-4)."""
    n = costs.size
    spread = float(costs.std())
    if n < 4 or spread <= 1e-9 * float(np.abs(costs).max()):
        return 0.0
    z = (costs - costs.mean()) / spread
    g2 = float(np.mean(z**4)) - 3.0
    return round(((n + 1) * g2 + 6.0) * (n - 1) / ((n - 2) * (n - 3)), 2)


def widened(costs: np.ndarray) -> np.ndarray:
    """The window with its deviations from the mean scaled by :func:`spread_factor`.

    The mean is kept, so the expected bill is unchanged. The stretch stops where the
    cheapest retraining would reach $0 (it matters only for tiny windows: with n = 2
    the factor is 4.2), so no cost goes below 0 and the mean still holds.
    """
    mean = float(costs.mean())
    factor = spread_factor(costs.size, excess_kurtosis(costs))
    lowest = float(costs.min())
    if lowest < mean:
        factor = min(factor, mean / (mean - lowest))
    # At the stop the cheapest is 0 up to rounding (-1e-9): never a negative cost.
    return np.maximum(mean + (costs - mean) * factor, 0.0)


def _columns(
    costs: Sequence[float] | FailureWindow,
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    if isinstance(costs, FailureWindow):
        return (
            np.asarray(costs.failure_free_usd, dtype=float),
            np.asarray(costs.expected_failures, dtype=float),
            np.asarray(costs.usd_per_failure, dtype=float),
        )
    base = np.asarray(costs, dtype=float)
    if base.size == 0:
        raise PlanningError("no retraining costs to forecast from")
    if not np.all(np.isfinite(base)) or np.any(base < 0):
        raise PlanningError("retraining costs must be finite and >= 0")
    return base, None, None


def _stretch(costs: Sequence[float] | FailureWindow) -> float:
    base = _columns(costs)[0]
    return spread_factor(base.size, excess_kurtosis(base))


def _mean_and_median(costs: Sequence[float] | FailureWindow) -> tuple[float, float, int]:
    if isinstance(costs, FailureWindow):
        expected = [
            c + k * f
            for c, k, f in zip(
                costs.failure_free_usd, costs.expected_failures, costs.usd_per_failure, strict=True
            )
        ]
        return costs.mean_cost_usd, float(np.median(expected)), len(expected)
    values = [float(c) for c in costs]
    return math.fsum(values) / len(values), float(np.median(values)), len(values)


def forecast_bill(
    costs: Sequence[float] | FailureWindow,
    runs: RunsInMonth,
    *,
    budget_usd: float | None = None,
    draws: int = DEFAULT_DRAWS,
    seed: int = 0,
) -> BillForecast:
    """The month's bill from a window of retraining costs (or a :class:`FailureWindow`).

    Check (methodology.md §5.3): a window of 20 retrainings, 14 at $100 and 6 at $300,
    at 2 runs/week in calendar months: E[B] = 8.667 x $160 = $1,386.67.
    """
    if budget_usd is not None and not (math.isfinite(budget_usd) and budget_usd >= 0):
        raise PlanningError("budget must be >= 0")
    simulated = bill_draws(costs, runs, draws=draws, seed=seed)
    mean, median, n = _mean_and_median(costs)
    expected = runs.mean * mean
    lo, mid, hi = bill_quantiles(simulated)
    p_over = p_exceeds(simulated, budget_usd)
    working = [
        f"Runs in the month: {runs.describe()}.",
        f"Window: {n} retrainings, mean ${mean:,.2f}, typical (median) ${median:,.2f}.",
        f"Expected bill = {runs.mean:.4g} x ${mean:,.2f} = ${expected:,.2f}.",
        f"{draws} draws (seed {seed}): resample the window (deviations x "
        f"{_stretch(costs):.3f}), draw N retraining costs from it, add them: "
        f"p10 ${lo:,.0f}, p50 ${mid:,.0f}, p90 ${hi:,.0f}.",
    ]
    if p_over is not None:
        working.append(f"P(bill > ${budget_usd:,.0f} budget) = {p_over:.1%}.")
    if n < 5:
        working.append(f"Only {n} retraining(s) in the window: the spread is a rough guide.")
    return BillForecast(
        runs=runs,
        runs_in_month=runs.mean,
        window_size=n,
        mean_retraining_usd=mean,
        typical_retraining_usd=median,
        expected_bill_usd=expected,
        bill_p10_usd=lo,
        bill_p50_usd=mid,
        bill_p90_usd=hi,
        budget_usd=budget_usd,
        p_over_budget=p_over,
        seed=seed,
        working=tuple(working),
        draws=simulated,
    )


# Not called by the app: the library call docs/bill.md documents (tests/planning check it).
def portfolio_expected_bill(forecasts: Sequence[BillForecast]) -> float:
    """Sum of the pipelines' expected bills. Expectations add, so this is the
    portfolio's expected bill; percentiles do not add (a portfolio p90 is not the sum of
    p90s), which is why only the expected bill is totalled."""
    return math.fsum(f.expected_bill_usd for f in forecasts)
