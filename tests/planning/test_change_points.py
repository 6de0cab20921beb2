"""How likely each change point is (app/planning/change_points.py: evidence,
start_weights), the organisation's rate of changes (app/planning/org_prior.py), and the
forecast over an uncertain change (a mixture: app/planning/cost_series.py,
series_bill.py). Worked by hand in each test."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from app.planning.change_points import change_evidence, evidence, start_weights
from app.planning.cost_series import fit
from app.planning.org_prior import FIXED_PRIOR, OrgPrior, WindowStats, combine, window_stats
from app.planning.schedule import exactly
from app.planning.series_bill import expected_bill, forecast_series, series_draws

WEEKS = 7.0 * np.arange(12)
STEP = np.array([0.0] * 8 + [0.3] * 4)  # log costs: 35% up after the 8th


def test_each_split_is_weighed_by_its_residuals() -> None:
    # STEP with a prior spread 0.1 counting as 4 degrees of freedom: the best model
    # (two levels split at 8) leaves no residual, so s^2 = (0 + 4 x 0.01) / (12 - 2 + 4)
    # = 1/350 and ln m = -RSS x 175 - ln 12 - ln 9 (two levels, nine positions).
    # Split at 8: RSS 0, ln m = -4.682. At 7: one 0 joins the right side, RSS = 5 x 1/5
    # x 4/5 x 0.09 = 0.072, 12.6 lower. At 9: a 0.3 joins the left, RSS = 9 x 1/9 x
    # 8/9 x 0.09 = 0.08, 14 lower. One level: RSS = 12 x 2/3 x 1/3 x 0.09 = 0.24,
    # ln m = -42 - ln 12 / 2, far below a line (whose RSS the test computes).
    starts, logs = evidence(STEP, WEEKS, (0.1, 4.0))
    at = dict(zip(starts.tolist(), logs.tolist(), strict=True))
    assert at[8] == pytest.approx(-math.log(12) - math.log(9))
    assert at[8] - at[7] == pytest.approx(12.6)
    assert at[8] - at[9] == pytest.approx(14.0)
    line = np.polyval(np.polyfit(WEEKS, STEP, 1), WEEKS)
    rss_line = float(((STEP - line) ** 2).sum())
    none = np.logaddexp(-0.24 * 175 - math.log(12) / 2, -rss_line * 175 - math.log(12))
    assert at[0] == pytest.approx(none + math.log(0.5))
    # As weights, at a change rate of 1/2: the split at 8 against its neighbours.
    starts, weights = start_weights(STEP, WEEKS, (0.1, 4.0), 0.5)
    w = dict(zip(starts.tolist(), weights.tolist(), strict=True))
    assert w[7] / w[8] == pytest.approx(math.exp(-12.6))
    assert w[9] / w[8] == pytest.approx(math.exp(-14.0))
    assert sum(w.values()) == pytest.approx(1.0) and w[8] > 0.9999
    # A rate of 1/5 makes no change 4 times likelier against each split ((4/5) / (1/5)
    # against (1/2) / (1/2)).
    _, rarer = start_weights(STEP, WEEKS, (0.1, 4.0), 0.2)
    assert (rarer[0] / rarer[8]) / (weights[0] / weights[8]) == pytest.approx(4.0)


def test_steps_under_ten_percent_and_short_windows_are_no_change() -> None:
    # A 5% step is no change whatever the costs say (MIN_STEP), and under 8
    # retrainings (SPLIT_MIN) nothing is weighed: no change, certainly.
    small = np.array([0.0] * 8 + [math.log(1.05)] * 4)
    starts, weights = start_weights(small, WEEKS, (0.1, 4.0), 0.5)
    assert weights[0] == 1.0 and np.all(weights[1:] == 0.0)
    starts, weights = start_weights(STEP[:7], WEEKS[:7], (0.1, 4.0), 0.9)
    assert starts.tolist() == [0] and weights.tolist() == [1.0]
    assert change_evidence(STEP[:7], WEEKS[:7], (0.1, 4.0)) is None
    assert change_evidence(small, WEEKS, (0.1, 4.0)) == -math.inf


def test_the_rate_of_changes_is_the_organisations() -> None:
    # Three windows whose Bayes factors are e^50 (a change, certainly), e^50 and e^-50
    # (none): each window's chance is 1, 1 and 0 whatever the rate q, so q = (1 + 1 + 0
    # + 1) / (3 + 2) = 3/5 (one window of each kind added).
    def window(change: float | None) -> WindowStats:
        return WindowStats(0.1, 9, 0, 10, 0.0, None, change)

    prior = combine([window(50.0), window(50.0), window(-50.0), window(None)])
    assert prior.change_rate == pytest.approx(3 / 5)
    # Windows too short to tell leave the fixed prior's rate (one window in five).
    assert combine([window(None), window(None)]).change_rate == FIXED_PRIOR.change_rate == 0.2
    # Bayes factors of 1 (the costs say nothing): every chance is q itself, so q =
    # (N q + 1) / (N + 2), whose fixed point is 1/2.
    assert combine([window(0.0)] * 40).change_rate == pytest.approx(0.5, abs=1e-4)
    # A window's evidence is the forecast's, its spread pooled with the fixed prior's
    # (0.25, as 4 degrees of freedom): costs that double after the 8th of 12 make a
    # change more than e^10 times likelier than none (one level leaves RSS = 12 x 2/3 x
    # 1/3 x (ln 2)^2 = 1.28, 36 lower in ln m at s^2 = 0.25 / 14; a line, which follows
    # a step in part, is nearer); STEP's 35% only suggests one; seven retrainings say
    # nothing.
    doubled = window_stats([100.0] * 8 + [200.0] * 4, [0.0] * 12, list(WEEKS))
    assert doubled.change is not None and doubled.change > 10
    costs = list(100 * np.exp(STEP))
    stats = window_stats(costs, [0.0] * 12, list(WEEKS))
    assert stats.change == pytest.approx(change_evidence(STEP, WEEKS, (0.25, 4.0)))
    assert stats.change is not None and 0 < stats.change < 3
    assert window_stats(costs[:7], [0.0] * 7, list(WEEKS[:7])).change is None


def test_an_uncertain_change_makes_the_bill_a_mixture() -> None:
    # Twenty weekly costs, the last six 30% lower, with noise: the costs leave the
    # change uncertain at a rate of one window in five, so the forecast weighs the six
    # since and all twenty. E[B] is their weighted sum, exactly, and the draws' mean.
    rng = np.random.default_rng(11)
    days = 7.0 * np.arange(20)
    costs = 100 * np.exp(0.15 * rng.standard_normal(20)) * np.where(np.arange(20) >= 14, 0.7, 1)
    prior = OrgPrior(log_spread=0.15, pipelines=10, change_rate=0.2)
    model = fit(costs, np.zeros(20), days, prior=prior)
    hyps = model.hypotheses
    assert len(hyps) == 2 and sum(h.weight for h in hyps) == pytest.approx(1.0)
    assert {h.size for h in hyps} == {6, 20} and model.borrows
    future = days[-1] + 7.0 * np.arange(1, 5)
    each = [expected_bill(replace(h, others=(), weight=1.0), exactly(4), future) for h in hyps]
    weighed = math.fsum(h.weight * e for h, e in zip(hyps, each, strict=True))
    assert expected_bill(model, exactly(4), future) == pytest.approx(weighed, rel=1e-12)
    draws = series_draws(model, exactly(4), future, draws=40_000, seed=3)
    assert draws.mean() == pytest.approx(weighed, rel=0.01)
    later, whole = sorted(hyps, key=lambda h: h.size)
    assert later.change is not None and later.change.likely == later.weight
    sentence = next(s for s in model.sentences if s.startswith("Costs may have fallen"))
    assert f"the costs make a change then {later.weight:.0%} likely" in sentence
    assert sentence.endswith(f"and all 20 at {whole.weight:.0%}.")
    working = forecast_series(model, exactly(4), future).working
    assert f"Windows weighed: the last {hyps[0].size} ({hyps[0].weight:.0%}) and " in working[1]
