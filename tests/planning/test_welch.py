"""Welch's t helpers (Welch 1947)."""

from __future__ import annotations

import math

import pytest
from scipy import stats

from app.planning.model import PlanningError
from app.planning.welch import one_sided_bounds, p_value_above, runs_needed_per_arm, welch


def test_welch_hand_worked_and_matches_scipy() -> None:
    # baseline 1,2,3: mean 2, var 1; candidate 4,6,8: mean 6, var 4
    # se = sqrt(1/3 + 4/3) = 1.29099; df = (5/3)^2 / ((1/3)^2/2 + (4/3)^2/2) = 2.9412
    c = welch([1.0, 2.0, 3.0], [4.0, 6.0, 8.0])
    assert c.diff == 4.0
    assert c.se == pytest.approx(math.sqrt(5 / 3))
    assert c.df == pytest.approx((25 / 9) / (1 / 18 + 16 / 18))
    ref = stats.ttest_ind([4.0, 6.0, 8.0], [1.0, 2.0, 3.0], equal_var=False, alternative="greater")
    assert p_value_above(c, 0.0) == pytest.approx(float(ref.pvalue))
    lo, hi = one_sided_bounds(c, 0.05)
    half = float(stats.t.ppf(0.95, c.df)) * c.se
    assert (lo, hi) == pytest.approx((4.0 - half, 4.0 + half))


def test_welch_zero_variance_and_too_few() -> None:
    c = welch([1.0, 1.0], [2.0, 2.0])
    assert c.se == 0.0 and c.df is None
    assert one_sided_bounds(c, 0.05) == (1.0, 1.0)
    assert p_value_above(c, 0.5) == 0.0 and p_value_above(c, 1.5) == 1.0
    with pytest.raises(PlanningError):
        welch([1.0], [2.0, 3.0])


def _brute_force(vb: float, vc: float, gap: float, alpha: float) -> int:
    n = 2
    while True:
        df = (n - 1) * (vb + vc) ** 2 / (vb**2 + vc**2)
        if abs(gap) >= float(stats.t.ppf(1 - alpha, df)) * math.sqrt((vb + vc) / n):
            return n
        n += 1


@pytest.mark.parametrize(
    ("vb", "vc", "gap"),
    [(0.00025, 0.00025, 0.015), (1.0, 4.0, 1.0), (2.0, 0.5, -0.3), (1.0, 0.0, 2.0)],
)
def test_runs_needed_is_the_smallest_sufficient_n(vb: float, vc: float, gap: float) -> None:
    assert runs_needed_per_arm(vb, vc, gap, 0.05) == _brute_force(vb, vc, gap, 0.05)


def test_runs_needed_hand_worked_and_edges() -> None:
    # v = 0.0005, gap = 0.015: normal n = ceil(1.645^2 x 0.0005 / 0.015^2) = 7;
    # n = 7: df 12, 1.782 x sqrt(0.0005/7) = 0.01506 > 0.015; n = 8: 1.761 x 0.00791 = 0.0139 -> 8
    assert runs_needed_per_arm(0.00025, 0.00025, 0.015, 0.05) == 8
    assert runs_needed_per_arm(1.0, 1.0, 0.0, 0.05) is None  # exactly on the threshold
    assert runs_needed_per_arm(0.0, 0.0, 1.0, 0.05) == 2
    assert runs_needed_per_arm(1.0, 1.0, 1e-9, 0.05) is None  # beyond a million runs


def test_tiny_variances_do_not_underflow_the_degrees_of_freedom() -> None:
    from app.planning.welch import welch

    # Variances ~1e-170: their squares underflow to 0.0 in the textbook formula.
    c = welch([0.0, 1e-85, 2e-85], [1e-85, 2e-85, 3e-85])
    assert c.se > 0
    # Equal variances and sizes: df = (a + b)^2 / (2 a^2 / 2) = 2 (n - 1) = 4.
    assert c.df == pytest.approx(4.0)


def test_runs_needed_for_a_tiny_alpha_or_a_denormal_gap_is_finite_or_none() -> None:
    # vb = vc = 1, gap 1, power 0.8. At alpha = 1e-20, 1 - alpha == 1.0 and ppf gave inf
    # (ceil(inf): OverflowError); the upper tail gives z = 9.2623. Normal lower bound:
    # (9.2623 + 0.8416)^2 x 2 / 1 = 204.2; Welch df 2(n - 1) widens the t quantile, so the
    # search steps up from 205, to 224 (the smallest n that clears, as the search checks).
    assert runs_needed_per_arm(1.0, 1.0, 1.0, 1e-20, 0.8) == 224
    # At 0.05: (1.6449 + 0.8416)^2 x 2 = 12.4 -> 13; the t quantiles at df 24 make it 14.
    assert runs_needed_per_arm(1.0, 1.0, 1.0, 0.05, 0.8) == 14
    # A denormal gap: gap^2 underflows to 0 (division by zero once): no n decides it.
    assert runs_needed_per_arm(1.0, 1.0, 5e-324, 0.05, 0.8) is None


def test_gate_thresholds_refuse_an_alpha_below_the_minimum() -> None:
    from app.planning.gate import GateThresholds
    from app.planning.welch import ALPHA_MIN

    assert GateThresholds(alpha=ALPHA_MIN).alpha == 1e-6
    with pytest.raises(PlanningError, match="alpha"):
        GateThresholds(alpha=1e-20)
