"""The utilization chosen from a window's DCGM means (app/planning/dcgm.py)."""

from __future__ import annotations

import math

import pytest

from app.planning.dcgm import choose, window_mean


def test_window_mean_skips_stale_points() -> None:
    # (0.4 + 0.6 + 0.5) / 3 = 0.5; NaN is a stale series, not a point.
    assert window_mean([0.4, math.nan, 0.6, 0.5]) == pytest.approx(0.5)
    assert window_mean([]) is None


def test_profiling_is_preferred() -> None:
    chosen = choose(0.42, 87.0)
    assert (chosen.utilization, chosen.source, chosen.note) == (0.42, "dcgm_gr_engine_active", "")


def test_gpu_util_stands_in_when_profiling_is_absent() -> None:
    chosen = choose(None, 87.0)  # 87 % -> 0.87
    assert (chosen.utilization, chosen.source) == (0.87, "dcgm_gpu_util")


def test_silent_zero_uses_gpu_util_and_says_so() -> None:
    chosen = choose(0.003, 91.0)  # 0.003 <= 0.01 while 91 % > 50 %
    assert (chosen.utilization, chosen.source) == (0.91, "dcgm_gpu_util")
    assert "reads 0.003 while DCGM_FI_DEV_GPU_UTIL reads 91%" in chosen.note


def test_a_quiet_gpu_is_not_a_silent_zero() -> None:
    # Profiling 0 while GPU_UTIL 30 %: an idle GPU, not a broken metric -> 0.
    chosen = choose(0.0, 30.0)
    assert (chosen.utilization, chosen.source) == (0.0, "dcgm_gr_engine_active")


def test_nothing_measured_is_unknown() -> None:
    assert choose(None, None).utilization is None
