"""The cost series model and its bill (app/planning/cost_series.py, series_bill.py):
DOMAIN.md section 9's worked checks (change), worked by hand in each test."""

from __future__ import annotations

import math

import numpy as np
import pytest

from app.planning.cost_series import FIXED_PRIOR, OrgPrior, find_split, fit, org_prior, theil_sen
from app.planning.model import PlanningError
from app.planning.schedule import exactly
from app.planning.series_bill import expected_bill, forecast_series, schedule_days, series_draws

# An organisation of identical, noiseless pipelines: nothing to borrow but zeros, so the
# worked checks below are exact.
CLEAN = OrgPrior(log_spread=0.0, tail_share=0.0, tail_ratio=1.0, pipelines=10)
WEEKS = 7.0 * np.arange(12)
NEXT_FOUR = WEEKS[-1] + 7.0 * np.arange(1, 5)


def test_the_trend_prices_each_retraining_at_its_date() -> None:
    # Twelve weekly costs growing exactly 2% a week from $100 (weeks 0-11): the window's
    # mean is 100 x (1.02^12 - 1) / (0.02 x 12) = $111.77 and a flat forecast of the next
    # four says 4 x 111.77 = $447.08; the trend says 100 x (1.02^12 + ... + 1.02^15)
    # = 100 x 1.02^12 x (1.02^4 - 1) / 0.02 = $522.72.
    costs = 100.0 * 1.02 ** np.arange(12)
    assert costs.mean() == pytest.approx(111.77, abs=0.005)
    model = fit(costs, np.zeros(12), WEEKS, prior=CLEAN)
    assert model.slope == pytest.approx(math.log(1.02) / 7)
    assert model.slope_se == pytest.approx(0.0, abs=1e-12)  # an exact line
    bill = forecast_series(model, exactly(4), NEXT_FOUR)
    assert bill.expected_bill_usd == pytest.approx(522.72, abs=0.005)
    assert bill.bill_p10_usd == pytest.approx(522.72, abs=0.005)  # no noise: one bill
    # 1.02^(30.44/7) - 1 = 9.0% a month.
    assert bill.sentences == (
        "Costs rose 9% a month over the last 12 retrainings; the forecast follows the trend.",
    )


def test_a_declared_change_starts_the_window() -> None:
    # Eight weekly retrainings at $200, a declared optimization, four at $130: the next
    # four cost 4 x 130 = $520, not 4 x the window mean (8 x 200 + 4 x 130) / 12 =
    # $176.67 -> $706.67.
    costs = [200.0] * 8 + [130.0] * 4
    declared = [(WEEKS[8] - 1.0, "smaller batch")]
    model = fit(costs, [0.0] * 12, WEEKS, declared, prior=CLEAN)
    assert model.size == 4 and model.change is not None and model.change.declared
    assert model.change.ratio == pytest.approx(0.65)
    assert expected_bill(model, exactly(4), NEXT_FOUR) == pytest.approx(520.0)
    assert 4 * np.mean(costs) == pytest.approx(706.67, abs=0.005)
    # Day 55 is 1970-02-25; 1 - 130/200 = 35%.
    assert model.sentences[0] == (
        "Costs fell 35% after the change on Feb 25 (smaller batch); the forecast uses the "
        "4 retrainings since."
    )
    assert "borrowed from the organisation's other 9 pipelines" in model.sentences[1]


def test_an_undeclared_step_is_found_and_noise_is_not() -> None:
    # The same step with no annotation: one level leaves RSS = 12 x var > 0, two levels
    # explain it exactly, so the split at index 8 is found.
    y = np.log([200.0] * 8 + [130.0] * 4)
    assert find_split(y, WEEKS) == 8
    # Noise alone (sd 0.15 in log, 20 retrainings): at most 1 false split in 200 windows
    # (the penalty 6 + 3 ln 20 = 15 on n ln(RSS1/RSS2)).
    rng = np.random.default_rng(3)
    days = 7.0 * np.arange(20)
    found = sum(find_split(0.15 * rng.standard_normal(20), days) is not None for _ in range(200))
    assert found <= 1
    # A straight trend is not a step: the line explains it better than any split.
    assert find_split(np.log(1.02) * np.arange(20), days) is None


def test_theil_sen_ignores_one_outlier() -> None:
    # y = 0.01 x plus one wild point: the median of the pairwise slopes stays 0.01.
    x = np.arange(10.0)
    y = 0.01 * x
    y[4] += 5.0
    slope, _ = theil_sen(y, x)
    assert slope == pytest.approx(0.01)


def test_abandoned_retrainings_count_at_what_they_cost() -> None:
    # Eight retrainings at $200 that succeeded first time and two abandoned after failed
    # attempts, $300 each (their newest attempt $150, the other $150 extra): a retraining
    # costs (8 x 200 + 2 x 300) / 10 = $220 on average, for a pipeline alone in its
    # organisation (its own tail, exactly): mean base (8 x 200 + 2 x 150) / 10 = 190,
    # tail share 2/10, extra over the mean base 300 / (2 x 190): 190 x (1 + 0.2 x 0.7895)
    # = $220.
    costs = [200.0] * 4 + [300.0] + [200.0] * 4 + [300.0]
    extras = [0.0] * 4 + [150.0] + [0.0] * 4 + [150.0]
    model = fit(costs, extras, 7.0 * np.arange(10), prior=FIXED_PRIOR)
    assert model.mean_cost() == pytest.approx(220.0)
    assert expected_bill(model, exactly(4), [70.0, 77.0, 84.0, 91.0]) == pytest.approx(880.0)


def test_the_expected_bill_is_the_mean_of_the_draws() -> None:
    # E[B] in closed form (the trend's lognormal factor exp(b dt + se^2 dt^2 / 2)
    # included) against 40,000 draws: within 1% (the draws' standard error is ~0.2%).
    rng = np.random.default_rng(7)
    days = 7.0 * np.arange(20)
    costs = 100 * np.exp(0.003 * days + 0.1 * rng.standard_normal(20))
    model = fit(costs, np.zeros(20), days, prior=FIXED_PRIOR)
    assert model.slope > 0
    future = days[-1] + 7.0 * np.arange(1, 5)
    draws = series_draws(model, exactly(4), future, draws=40_000, seed=1)
    assert draws.mean() == pytest.approx(expected_bill(model, exactly(4), future), rel=0.01)


def test_small_windows_borrow_the_organisations_spread_and_tail() -> None:
    # Two windows: bases (100, 100) and (100, 400), the second with $200 extra on its
    # second retraining: pooled log spread sqrt((0 + (ln 4)^2 / 2) / 2) = 0.693, tail
    # share 1 of 4, extra over that pipeline's mean base 200 / 250 = 0.8.
    prior = org_prior([([100.0, 100.0], [0.0, 0.0], [0.0, 7.0]),
                       ([100.0, 600.0], [0.0, 200.0], [0.0, 7.0])])  # fmt: skip
    assert prior.log_spread == pytest.approx(math.log(4) / 2)
    assert (prior.tail_share, prior.tail_ratio, prior.pipelines) == (0.25, 0.8, 2)
    # A window of 2 since a change borrows all its draws' spread (borrow = 1).
    model = fit([100.0, 100.0], [0.0, 0.0], [0.0, 7.0], prior=prior)
    assert model.borrow == 1.0 and "other 1 pipelines" in model.sentences[-1]
    # Alone: the fixed prior, and it says so.
    alone = fit([100.0] * 4, [0.0] * 4, [0.0, 7.0, 14.0, 21.0])
    assert "a fixed prior (no other pipelines to learn from)" in alone.sentences[-1]
    bill = forecast_series(alone, exactly(4), [28.0, 35.0, 42.0, 49.0])
    assert bill.bill_p10_usd < 400.0 < bill.bill_p90_usd  # spread borrowed: a band


def test_schedule_days_and_bad_input() -> None:
    # Newest on day 0 at 1/week, now day 10: the next three are days 14, 21, 28.
    assert schedule_days(0.0, 1.0, 10.0, 3) == [14.0, 21.0, 28.0]
    # A start at now counts (as the month's count of retrainings still to start does).
    assert schedule_days(0.0, 1.0, 7.0, 3) == [7.0, 14.0, 21.0]
    assert schedule_days(0.0, 1.0, 0.0, 1) == [7.0]  # never the newest one again
    assert schedule_days(0.0, 1.0, 10.0, 0) == []
    with pytest.raises(PlanningError, match="extras between 0 and the cost"):
        fit([100.0], [150.0], [0.0])
    with pytest.raises(PlanningError, match="equal, non-zero length"):
        fit([], [], [])
    with pytest.raises(PlanningError, match="a future day for every retraining"):
        series_draws(fit([1.0], [0.0], [0.0]), exactly(2), [1.0])
