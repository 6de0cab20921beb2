"""The month's bill as a distribution: DOMAIN.md section 9's worked checks (methodology.md §5.3).

The known cost distribution of the checks: a retraining costs $100 with probability 0.7
and $300 with probability 0.3 (its first attempt failed and ran again); mean
0.7 x 100 + 0.3 x 300 = $160. With K the number of $300 retrainings among N,
B = 100 N + 200 K, K ~ Binomial(N, 0.3).
"""

from __future__ import annotations

import numpy as np
import pytest

from app.planning.bill import (
    FailureWindow,
    bill_draws,
    bill_quantiles,
    excess_kurtosis,
    failure_window,
    forecast_bill,
    portfolio_expected_bill,
    spread_factor,
)
from app.planning.bill_exact import exact_bill
from app.planning.model import PlanningError
from app.planning.schedule import exactly, typical_month_runs
from tests.fixtures.planning import make_run_facts

COSTS = (100.0, 300.0)
PROBS = (0.7, 0.3)
BUDGET = 1200.0
# The window: the last 20 retrainings, 14 at $100 and 6 at $300 (mean $160).
WINDOW = [100.0] * 14 + [300.0] * 6


def test_nine_runs() -> None:
    # N = 9: B = 900 + 200K. E[B] = 9 x 160 = 1440.
    # P(B > 1200) = P(K >= 2) = 1 - 0.7^9 - 9 x 0.3 x 0.7^8 = 1 - 0.04035 - 0.15565 = 0.8040.
    # CDF of K: P(K <= 2) = 0.4628, P(K <= 3) = 0.7297, P(K <= 4) = 0.9012, so the
    # median K is 3 (B = 1500) and the p90 K is 4 (B = 1700).
    bill = exact_bill(COSTS, PROBS, exactly(9))
    assert bill.mean == pytest.approx(1440.0)
    assert bill.p_over(BUDGET) == pytest.approx(0.8040, abs=5e-5)
    assert bill.quantile(0.5) == 1500.0
    assert bill.quantile(0.9) == 1700.0


def test_eight_runs() -> None:
    # N = 8: E[B] = 8 x 160 = 1280. P(B > 1200) = P(K >= 3) = 1 - (0.0576 + 0.1977 +
    # 0.2965) = 0.4482. P(K <= 3) = 0.8059 < 0.9 <= P(K <= 4) = 0.9420: p90 K = 4,
    # B = 800 + 800 = 1600. P(K <= 1) = 0.2553 < 0.5 <= P(K <= 2) = 0.5518: p50 $1,200.
    bill = exact_bill(COSTS, PROBS, exactly(8))
    assert bill.mean == pytest.approx(1280.0)
    assert bill.quantile(0.5) == 1200.0
    assert bill.p_over(BUDGET) == pytest.approx(0.4482, abs=5e-5)
    assert bill.quantile(0.9) == 1600.0


def test_typical_month_at_two_a_week() -> None:
    # m = 2 x 52/12 = 8.667: N = 9 with probability 2/3, else 8.
    # E[B] = 8.667 x 160 = 1386.67; P(B > 1200) = 2/3 x 0.8040 + 1/3 x 0.4482 = 0.6854.
    runs = typical_month_runs(2)
    assert runs.counts == (9, 8)
    assert runs.probabilities == pytest.approx((2 / 3, 1 / 3))
    bill = exact_bill(COSTS, PROBS, runs)
    assert bill.mean == pytest.approx(1386.6667, abs=1e-3)
    assert bill.p_over(BUDGET) == pytest.approx(0.6854, abs=5e-5)
    # p50: P(B <= 1300) = 0.4925 < 0.5 <= P(B <= 1400) = 0.5772; p90: P(B <= 1600) =
    # 0.8005 < 0.9 <= P(B <= 1700) = 0.9148.
    assert (bill.quantile(0.5), bill.quantile(0.9)) == (1400.0, 1700.0)
    # The old estimator: median $100 x 8.667 = $866.67, "within by $333".
    assert 100.0 * runs.mean == pytest.approx(866.67, abs=0.01)


def test_four_week_month_is_exactly_4k() -> None:
    assert typical_month_runs(2, "four_week") == exactly(8)
    assert typical_month_runs(1.5, "four_week") == exactly(6)
    assert typical_month_runs(0) == exactly(0)


def test_twenty_retraining_window_expected_bill() -> None:
    # A bootstrap's expectation is the window mean: 8.667 x (14 x 100 + 6 x 300) / 20 =
    # 8.667 x 160 = 1386.67, the same as the known distribution, and exactly that
    # (not a Monte Carlo estimate): every seed gives it.
    runs = typical_month_runs(2)
    forecasts = [forecast_bill(WINDOW, runs, budget_usd=BUDGET, seed=s) for s in (0, 1, 2)]
    for f in forecasts:
        assert f.expected_bill_usd == pytest.approx(1386.6667, abs=1e-3)
        assert f.typical_retraining_usd == 100.0
        assert f.runs_in_month == pytest.approx(8.6667, abs=1e-4)
    # ... and a wider spread than the known distribution's (the window's own
    # uncertainty). Exact p10: P(B <= 900) = 2/3 x 0.7^9 + 1/3 x 0.7^8 = 0.0269 + 0.0192
    # = 0.046 < 0.1 <= P(B <= 1000) = 0.046 + 1/3 x 8 x 0.3 x 0.7^7 = 0.112, so
    # p10 = $1,000; p90 = $1,700 (P(B <= 1600) = 0.800, P(B <= 1700) = 0.915).
    exact = exact_bill(COSTS, PROBS, runs)
    f = forecasts[0]
    assert exact.quantile(0.1) == 1000.0 and exact.quantile(0.9) == 1700.0
    assert f.bill_p90_usd - f.bill_p10_usd > 1700.0 - 1000.0
    assert f.bill_p90_usd > 1700.0
    # Over budget in most months: P is near the exact 0.6854, not the old 5%.
    assert 0.55 < f.p_over_budget < 0.75


def test_forecast_is_reproducible_and_seeded() -> None:
    runs = typical_month_runs(2)
    a = forecast_bill(WINDOW, runs, budget_usd=BUDGET, seed=7)
    b = forecast_bill(WINDOW, runs, budget_usd=BUDGET, seed=7)
    assert (a.bill_p10_usd, a.bill_p50_usd, a.bill_p90_usd, a.p_over_budget) == (
        b.bill_p10_usd,
        b.bill_p50_usd,
        b.bill_p90_usd,
        b.p_over_budget,
    )
    assert np.array_equal(a.draws, b.draws)


def test_large_window_matches_the_exact_distribution() -> None:
    # A window of 1000 in exact 700/300 proportions is the known distribution (its
    # spread factor is sqrt(1001/999) x 1.0007 = 1.0017, moving $100 to $99.90 and $300
    # to $300.33). At N = 9 the simulated CDF at each bill is within 0.025 of the exact
    # one (4000 draws: standard error <= 0.008, plus the resample's own spread), e.g.
    # P(B <= 1700) = P(K <= 4) = 0.9012. The p90 itself is not compared: the exact CDF
    # crosses 0.9 by 0.0012 at $1,700, so noise puts it on $1,700 or $1,900.
    window = [100.0] * 700 + [300.0] * 300
    f = forecast_bill(window, exactly(9), budget_usd=BUDGET, draws=4000, seed=3)
    exact = exact_bill(COSTS, PROBS, exactly(9))
    assert spread_factor(1000) == pytest.approx(1.0017, abs=1e-4)
    cdf = 0.0
    for bill, p in zip(exact.bills, exact.probabilities, strict=True):
        cdf += p
        assert np.mean(f.draws <= bill + 5.0) == pytest.approx(cdf, abs=0.025)
    assert f.p_over_budget == pytest.approx(0.8040, abs=0.025)
    assert f.bill_p50_usd == pytest.approx(1500.0, abs=1.0)
    assert f.expected_bill_usd == pytest.approx(1440.0)


def test_spread_factor_for_twenty() -> None:
    # sqrt(21/19) = 1.0513; t_0.9(19) / z_0.9 = 1.3277 / 1.2816 = 1.0360; product 1.0892.
    assert spread_factor(20) == pytest.approx(1.0892, abs=1e-4)
    assert spread_factor(1) == 1.0


def test_a_heavy_tailed_window_knows_its_spread_less_well() -> None:
    # Satterthwaite: df = 2 / (2/19 + 3/20) = 7.835 at excess kurtosis 3;
    # t_0.9(7.835) = 1.3995, / 1.2816 = 1.0920, x sqrt(21/19) = 1.1480.
    assert spread_factor(20, 3.0) == pytest.approx(1.1480, abs=1e-4)
    assert spread_factor(20, -1.24) == spread_factor(20)  # thin tails: df stays n - 1
    # 19 x $100 and one $500: mean 120, m2 = (19 x 20^2 + 380^2)/20 = 7,600,
    # m4 / m2^2 = (19 x 20^4 + 380^4)/20 / 7,600^2 = 18.05, g2 = 15.05,
    # G2 = (21 x 15.05 + 6) x 19 / (18 x 17) = 20.0.
    assert excess_kurtosis(np.array([100.0] * 19 + [500.0])) == pytest.approx(20.0, abs=0.01)
    # The window (14 x $100, 6 x $300) is two-valued: G2 = -1.24, stretch 1.089.
    assert excess_kurtosis(np.array(WINDOW)) == pytest.approx(-1.24, abs=0.01)


def test_no_runs_no_bill_and_bad_input() -> None:
    f = forecast_bill([120.0, 80.0], exactly(0), budget_usd=10.0)
    assert f.expected_bill_usd == 0.0 and f.bill_p90_usd == 0.0 and f.p_over_budget == 0.0
    with pytest.raises(PlanningError, match="no retraining costs"):
        forecast_bill([], exactly(3))
    with pytest.raises(PlanningError, match="finite and >= 0"):
        forecast_bill([100.0, -5.0], exactly(3))
    with pytest.raises(PlanningError, match="budget"):
        forecast_bill([100.0], exactly(3), budget_usd=-1.0)
    assert forecast_bill([100.0], exactly(3)).p_over_budget is None


def test_portfolio_total_is_the_sum_of_expected_bills() -> None:
    # 8.667 x 160 + 4.333 x 50 = 1386.67 + 216.67 = 1603.33: expectations add.
    a = forecast_bill(WINDOW, typical_month_runs(2), seed=1)
    b = forecast_bill([40.0, 60.0], typical_month_runs(1), seed=2)
    assert portfolio_expected_bill([a, b]) == pytest.approx(1603.333, abs=1e-3)


def test_failure_window_check() -> None:
    # 8 workers x 10 h, G = 80, no interruptions, $2/GPU-h, lambda = 1e-3, interval 2 h,
    # resume 0.5 h: failure-free 80 x 2 = $160; expected failures 1e-3 x 8 x 10 = 0.08;
    # one failure (2/2 + 0.5) h x 8 x $2 = $24; mean cost 160 + 0.08 x 24 = $161.92.
    run = make_run_facts(workers=8, wall_clock_hours=10.0, gpu_hours=80.0, price_per_gpu_hour=2.0)
    w = failure_window([run], 1e-3, checkpoint_interval_hours=2.0, resume_hours=0.5)
    assert w.failure_free_usd == (160.0,)
    assert w.expected_failures == pytest.approx((0.08,))
    assert w.usd_per_failure == (24.0,)
    assert w.mean_cost_usd == pytest.approx(161.92)
    # 4 runs in the month: E[B] = 4 x 161.92 = 647.68, and the draws are 640 plus $24
    # per failure (Poisson(0.32) failures in the month).
    f = forecast_bill(w, exactly(4), draws=4000, seed=0)
    assert f.expected_bill_usd == pytest.approx(647.68)
    extra = (f.draws - 640.0) / 24.0
    assert np.allclose(extra, np.round(extra)) and extra.min() == 0.0
    assert extra.mean() == pytest.approx(0.32, abs=0.03)


def test_failure_rate_zero_removes_recorded_failures() -> None:
    # Rate 0: every retraining at its failure-free cost. The run lost 1 h (0.5 h progress,
    # 0.25 h resume, 0.25 h reschedule) of 14: failure-free 8 x 13 x $2 = $208.
    from app.planning.model import Interruption

    run = make_run_facts(gpu_hours=112.0, interruptions=(Interruption(0.5, 0.25, 0.25),))
    w = failure_window([run], 0.0, checkpoint_interval_hours=1.0)
    assert w.failure_free_usd == (208.0,) and w.expected_failures == (0.0,)
    f = forecast_bill(w, exactly(3))
    assert f.expected_bill_usd == pytest.approx(624.0)
    assert np.all(f.draws == 624.0)
    with pytest.raises(PlanningError):
        FailureWindow((1.0,), (), ())


@pytest.mark.parametrize("n", [1, 2, 3, 7, 10, 999, 1000, 2000, 2001, 40_000])
def test_bill_quantiles_are_numpys_inverted_cdf(n: int) -> None:
    # The partition by hand against np.percentile's inverted_cdf, with ties: for n = 10
    # the p10 is the 1st smallest (10 x 0.1 - 1 = 0, whole), the p50 the 5th, the p90
    # the 9th; for n = 7 the 1st (0.7 - 1 < 0: clipped), the 4th (2.5 -> 3, 0-based)
    # and the 7th (5.3 -> 6).
    draws = np.round(np.random.default_rng(n).lognormal(6.0, 0.3, n), -1)
    expected = np.percentile(draws, [10.0, 50.0, 90.0], method="inverted_cdf")
    assert bill_quantiles(draws) == tuple(float(v) for v in expected)
    ordered = np.sort(draws)
    if n == 10:
        assert bill_quantiles(draws) == (ordered[0], ordered[4], ordered[8])
    if n == 7:
        assert bill_quantiles(draws) == (ordered[0], ordered[3], ordered[6])


def test_one_more_retraining_adds_to_every_draw() -> None:
    # The positions are drawn a retraining at a time and last, so with one seed a month
    # of N = 9 or 10 (2.2 a week) is each draw of N = 8 or 9 (2 a week: the counts
    # coupled through one uniform each) plus at most one more cost, never less: the
    # band cannot fall as the cadence rises.
    window = np.random.default_rng(4).lognormal(5.0, 0.4, 20)
    low = bill_draws(window, typical_month_runs(2.0), draws=500, seed=9)
    high = bill_draws(window, typical_month_runs(2.2), draws=500, seed=9)
    assert np.all(high >= low) and np.any(high > low)
