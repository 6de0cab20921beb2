"""The bill forecast is calibrated on a family of processes, not one (DOMAIN.md section 9,
issue 34 item 7), through the call every month-to-date figure makes
(``app.analytics.month.bill_of``: the cost series model of app/planning/cost_series.py,
the organisation's prior, each future retraining at its scheduled date).

Processes (weekly retrainings, $100 a retraining at the forecast's date, log sd 0.15
unless said): lognormal (log sd 0.30); rare 3x reruns (6% of retrainings cost two more
attempts); a 10%/month trend; a 35% step down six weeks ago (not declared: found from
the costs). Windows of 4 and 20 retrainings; the month is the next four retrainings
(days 7-28 after the newest). The organisation is 200 other pipelines of the same
process (their windows give the prior, rounded, as ``prior.prior_of`` does from all).

Targets: the p90 exceeded in 10 +- 4% of months in each case; the p10-p90 band no wider
than twice the true one; P(over) within 5 points of the observed share in each fifth of
predictions, pooled over the four processes of a window size, and for the step alone
with windows of 20 (the change found in the costs is uncertain there: the forecast weighs
the windows since each likely start, app/planning/change_points.py). Binomial error: with
MONTHS = 1000 months a case, a true 10% rate is read with sd sqrt(.1 x .9 / 1000) = 0.95
points, so +-4 points is 4.2 sd: a calibrated forecast passes, one at 15% does not (5.3
sd). A fifth of 4 x 1000 pooled predictions holds 800 months: sd <= sqrt(.25 / 800) =
1.8 points, the 5-point tolerance 2.8 sd; a fifth of the step's 1000 holds 200: sd <=
3.5 points, so alone it is the weaker check (before the weighing it was 30 points off).
Budgets are drawn per month around the true median bill (x U(0.8, 1.3)) so predictions
spread over (0, 1). Seeded; ~25 s here.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from functools import cache

import numpy as np
import pytest

from app.analytics.month import bill_of
from app.planning.bill import forecast_bill
from app.planning.cost_series import org_prior
from app.planning.org_prior import rounded
from app.planning.schedule import exactly

MONTHS = 1000
ORG = 200
DRAWS = 1000
SIGMA = 0.15
GROWTH = math.log(1.1) / 30.436875  # 10% a month, per day
NOW = datetime(2026, 11, 30, 12, tzinfo=UTC)  # half a day after the newest retraining
NEWEST = datetime(2026, 11, 30, tzinfo=UTC)
FUTURE = 7.0 * np.arange(1, 5)  # the month's four retrainings, days after the newest
PROCESSES = ("lognormal", "reruns", "trend", "step")


def simulate(process: str, rng: np.random.Generator, days: np.ndarray) -> tuple[np.ndarray, ...]:
    """Costs and extra attempts' costs of retrainings on ``days`` (day 0: the newest)."""
    sigma = 0.30 if process == "lognormal" else SIGMA
    base = 100.0 * np.exp(sigma * rng.standard_normal(days.shape) - sigma**2 / 2)
    extra = np.zeros_like(base)
    if process == "reruns":
        extra = np.where(rng.random(days.shape) < 0.06, 2.0 * base, 0.0)
    elif process == "trend":
        base = base * np.exp(GROWTH * days)
    elif process == "step":
        base = base * np.where(days > -42.0, 0.65, 1.0)
    return base + extra, extra


def series(costs: np.ndarray, extras: np.ndarray, days: np.ndarray) -> tuple:
    return tuple(
        (float(c), float(e), NEWEST + timedelta(days=float(d)))
        for c, e, d in zip(costs, extras, days, strict=True)
    )


@cache
def case(process: str, window: int) -> dict[str, np.ndarray | float]:
    """Per month: p90 exceeded, P(over), over, band width; the new forecast and the
    previous one (the plain window bootstrap, app/planning/bill.py) side by side."""
    rng = np.random.default_rng(PROCESSES.index(process) * 100 + window)
    past = -7.0 * np.arange(window)[::-1]
    prior = rounded(org_prior((*simulate(process, rng, past), past) for _ in range(ORG)))
    truth = np.array([simulate(process, rng, FUTURE)[0].sum() for _ in range(20_000)])
    t10, t50, t90 = np.percentile(truth, [10, 50, 90])
    out = np.zeros((MONTHS, 6))
    for m in range(MONTHS):
        costs, extras = simulate(process, rng, np.concatenate([past, FUTURE]))
        budget = t50 * rng.uniform(0.8, 1.3)
        actual = costs[window:].sum()
        s = series(costs[:window], extras[:window], past)
        bill = bill_of(s, (), 1.0, 4, NOW, prior, budget_usd=budget, draws=DRAWS, seed=m)
        old = forecast_bill(costs[:window], exactly(4), budget_usd=budget, draws=DRAWS, seed=m)
        out[m] = (
            actual > bill.bill_p90_usd,
            bill.p_over_budget or 0.0,
            actual > budget,
            bill.bill_p90_usd - bill.bill_p10_usd,
            actual > old.bill_p90_usd,
            old.p_over_budget or 0.0,
        )
    return {"months": out, "true_band": t90 - t10}


@pytest.mark.parametrize("window", [4, 20])
@pytest.mark.parametrize("process", PROCESSES)
def test_p90_is_exceeded_in_about_one_month_in_ten(process: str, window: int) -> None:
    found = case(process, window)
    months = found["months"]
    assert isinstance(months, np.ndarray)
    share = months[:, 0].mean()
    print(f"{process} n={window}: p90 exceeded {share:.1%} (before: {months[:, 4].mean():.1%})")
    assert abs(share - 0.10) <= 0.04
    assert months[:, 3].mean() <= 2.0 * float(found["true_band"])


def fifth_gaps(processes: tuple[str, ...], window: int, column: int = 1) -> list[float]:
    """Predicted minus observed share over, per fifth of the pooled predictions (column
    1: the forecast; 5: the previous one)."""
    months = np.concatenate([case(p, window)["months"] for p in processes])  # type: ignore[misc]
    order = np.argsort(months[:, column], kind="stable")
    return [months[p, column].mean() - months[p, 2].mean() for p in np.array_split(order, 5)]


@pytest.mark.parametrize("window", [4, 20])
def test_p_over_budget_is_calibrated_in_each_fifth(window: int) -> None:
    # All four processes pooled (4,000 months): within 5 points in every fifth. Before
    # the month's retrainings shared one window's level (a draw borrowed or resampled
    # as a whole), windows of 4 read 5.0 points off in their lowest fifth.
    gaps = fifth_gaps(PROCESSES, window)
    before = fifth_gaps(PROCESSES, window, column=5)
    print(f"n={window}: {np.round(gaps, 3)} (previous forecast: {np.round(before, 3)})")
    assert max(map(abs, gaps)) <= 0.05


def test_p_over_budget_is_calibrated_after_a_step_found_in_the_costs() -> None:
    # Windows of 20 with the 35% step six weeks ago (six retrainings since, log sd 0.15,
    # not declared): the split is clear in about 2 windows of 3. When it was missed the
    # window mixed both levels and its P(over) was too sure (~0.9-0.99 said where ~0.6-0.8
    # went over: 30 points off in a fifth). Weighing the likely starts by their evidence,
    # with the organisation's rate of changes (here nearly every window changed), keeps
    # every fifth within 5 points; the previous forecast (the plain window) is far off.
    gaps = fifth_gaps(("step",), 20)
    before = fifth_gaps(("step",), 20, column=5)
    print(f"step n=20: {np.round(gaps, 3)} (previous forecast: {np.round(before, 3)})")
    assert max(map(abs, gaps)) <= 0.05
    assert max(map(abs, before)) > 0.2


def test_the_previous_forecast_missed_the_trend() -> None:
    # The plain window bootstrap on the trend with 20-retraining windows: the p90 is
    # exceeded far more often than one month in ten (the issue measured 70% through the
    # API on its scenario); the model above holds 10 +- 4%.
    months = case("trend", 20)["months"]
    assert isinstance(months, np.ndarray)
    assert months[:, 4].mean() > 0.25
    assert abs(months[:, 0].mean() - 0.10) <= 0.04
