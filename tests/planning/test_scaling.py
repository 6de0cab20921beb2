"""Scaling probe: table, Amdahl / USL fits and advice (methodology.md §6)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.planning.model import PlanningError
from app.planning.scaling import (
    ScalingPoint,
    fit_usl,
    scaling_advice,
    scaling_table,
    usl_capacity,
)
from tests.fixtures.planning import PROPERTY

PROBE = [
    ScalingPoint(8, 14.4),
    ScalingPoint(8, 14.0),
    ScalingPoint(8, 13.6),
    ScalingPoint(16, 13.0),
]


def test_scaling_table_uses_medians_and_smallest_count() -> None:
    # N0 = 8, T(8) = median(14.4, 14, 13.6) = 14; S(16) = 14/13 = 1.0769; E = 1.0769 x 8/16 = 0.5385
    rows = scaling_table(PROBE)
    assert [r.workers for r in rows] == [8, 16]
    assert rows[0].runs == 3 and rows[0].wall_clock_hours == pytest.approx(14.0)
    assert (rows[0].speedup, rows[0].efficiency) == (1.0, 1.0)
    assert rows[1].speedup == pytest.approx(14 / 13)
    assert rows[1].efficiency == pytest.approx(14 / 13 / 2)
    assert (rows[0].gpu_hours, rows[1].gpu_hours) == pytest.approx((112.0, 208.0))
    assert scaling_table([]) == []


def test_point_validation() -> None:
    with pytest.raises(PlanningError):
        ScalingPoint(0, 1.0)
    with pytest.raises(PlanningError):
        ScalingPoint(4, 0.0)


def test_too_few_counts_give_no_model() -> None:
    assert fit_usl([]) is None
    assert fit_usl([ScalingPoint(8, 14.0), ScalingPoint(8, 15.0)]) is None


def test_two_counts_fit_amdahl_through_both_points() -> None:
    # 2 (1 + 7s) / (1 + 15s) = 14/13  =>  26 + 182 s = 14 + 210 s  =>  s = 12/28 = 3/7
    m = fit_usl(PROBE)
    assert m is not None and m.kind == "amdahl"
    assert m.s == pytest.approx(3 / 7) and m.k == 0.0
    assert m.predict_wall_clock(8) == pytest.approx(14.0)
    assert m.predict_wall_clock(16) == pytest.approx(13.0)
    assert m.predict_gpu_hours(16) == pytest.approx(208.0)  # methodology.md §1: "~208 GPU-hours"
    assert m.peak_workers is None
    assert m.is_extrapolation(32) and m.is_extrapolation(4) and not m.is_extrapolation(12)
    assert m.rms_log_error == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(PlanningError):
        m.predict_wall_clock(0)


def test_amdahl_edge_cases_are_clamped_and_noted() -> None:
    # superlinear (2 workers 2.5x faster): s would be negative -> 0
    fast = fit_usl([ScalingPoint(1, 10.0), ScalingPoint(2, 4.0)])
    assert fast is not None and fast.s == 0.0 and "Superlinear" in fast.notes[0]
    # slower with more workers: s -> 1, capacity flat
    slow = fit_usl([ScalingPoint(1, 10.0), ScalingPoint(2, 12.0)])
    assert slow is not None and slow.s == pytest.approx(1.0) and "slower" in slow.notes[0]


def test_usl_capacity_and_peak() -> None:
    # C(10) with s = 0.05, k = 0.002: 10 / (1 + 0.45 + 0.18) = 6.135
    assert usl_capacity(10, 0.05, 0.002) == pytest.approx(10 / 1.63)
    # peak sqrt((1 - 0.05) / 0.002) = sqrt(475) = 21.79
    pts = [ScalingPoint(n, 100 / usl_capacity(n, 0.05, 0.002)) for n in (1, 2, 4, 8, 16, 32, 64)]
    m = fit_usl(pts)
    assert m is not None and m.kind == "usl"
    assert m.peak_workers == pytest.approx(math.sqrt(475), rel=1e-4)


@PROPERTY
@given(
    st.floats(0.0, 0.5),  # s
    st.floats(0.0, 0.01),  # k
    st.floats(1.0, 100.0),  # T1
)
def test_usl_fit_recovers_known_parameters(s: float, k: float, t1: float) -> None:
    pts = [ScalingPoint(n, t1 / usl_capacity(n, s, k)) for n in (1, 2, 4, 8, 16, 32)]
    m = fit_usl(pts)
    assert m is not None and m.kind == "usl"
    assert m.s == pytest.approx(s, abs=1e-4)
    assert m.k == pytest.approx(k, abs=1e-5)
    assert m.t1_hours == pytest.approx(t1, rel=1e-4)


def test_usl_fit_recovers_parameters_from_noisy_replicates() -> None:
    # s = 0.1, k = 0.001, T1 = 50 h; 3 runs per count with 2% log-normal noise (seeded)
    rng = np.random.default_rng(7)
    pts = [
        ScalingPoint(n, 50 / usl_capacity(n, 0.1, 0.001) * math.exp(rng.normal(0, 0.02)))
        for n in (1, 2, 4, 8, 16, 32, 64)
        for _ in range(3)
    ]
    m = fit_usl(pts)
    assert m is not None
    assert m.s == pytest.approx(0.1, abs=0.02)
    assert m.k == pytest.approx(0.001, abs=5e-4)
    assert m.rms_log_error < 0.03
    assert m.predict_wall_clock(16) == pytest.approx(50 / usl_capacity(16, 0.1, 0.001), rel=0.05)


def test_scaling_advice() -> None:
    low = scaling_advice(0.38, 0.54)
    assert len(low) == 2
    assert "38%" in low[0] and "starved" in low[0]
    assert "54%" in low[1]
    assert "No scaling probe" in scaling_advice(0.9, None)[0]
    pts = [ScalingPoint(n, 100 / usl_capacity(n, 0.02, 0.0005)) for n in (1, 2, 4, 8)]
    good = scaling_advice(0.85, 0.9, model=fit_usl(pts))
    assert len(good) == 1 and "high" in good[0] and "peaks near 44" in good[0]
    # thresholds are parameters
    assert "high" in scaling_advice(0.5, 0.6, min_utilization=0.4, min_efficiency=0.5)[0]


def test_scaling_advice_says_the_dollars() -> None:
    # E = 0.75: 1/0.75 - 1 = +33% GPU-hours. 485.3 GPU-h a month (112 x 52/12) at $2:
    # +161.8 GPU-h = +$323.6 a month.
    [below] = scaling_advice(0.85, 0.75, monthly_gpu_hours=485.3, price_per_gpu_hour=2.0)
    assert "+33% GPU-hours = +$324 a month (+162 GPU-h)" in below
    # Starved GPUs with a good probe (E = 0.9: 1/0.9 - 1 = +11%, 53.9 GPU-h, $107.8): the
    # dollars beside the utilization advice.
    starved = scaling_advice(0.38, 0.9, monthly_gpu_hours=485.3, price_per_gpu_hour=2.0)
    assert "+11% GPU-hours = +$108 a month" in starved[0] and "starved" in starved[0]
    # Poor efficiency: E = 0.5 doubles the GPU-hours: +100% = +$971 a month.
    poor = scaling_advice(0.85, 0.5, monthly_gpu_hours=485.3, price_per_gpu_hour=2.0)
    assert "+100% GPU-hours = +$971 a month" in poor[0]
    # E > 1 (superlinear) saves: 1/1.25 - 1 = -20% = -$194 a month.
    [cheaper] = scaling_advice(0.85, 1.25, monthly_gpu_hours=485.3, price_per_gpu_hour=2.0)
    assert "-20% GPU-hours = -$194 a month" in cheaper
