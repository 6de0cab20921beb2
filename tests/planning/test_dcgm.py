"""The utilization chosen from a window's DCGM means (app/planning/dcgm.py)."""

from __future__ import annotations

import math

import pytest

from app.planning.dcgm import choose, choose_gpus, coverage, not_a_measurement, window_mean


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


def test_values_no_gpu_can_read_are_not_measurements() -> None:
    # GPU_UTIL is a percent (0..100), the profiling ratio a fraction (0..1): the first
    # value outside its range is named; nothing is clamped to 0 or 100 %.
    assert not_a_measurement("DCGM_FI_DEV_GPU_UTIL", [0.0, 40.0, 100.0], 100) is None
    assert "DCGM_FI_DEV_GPU_UTIL reads 5000," in (
        not_a_measurement("DCGM_FI_DEV_GPU_UTIL", [40.0, 5000.0], 100) or ""
    )
    assert "reads inf," in (not_a_measurement("X", [math.inf], 100) or "")
    assert "reads nan," in (not_a_measurement("X", [0.5, math.nan], 1) or "")
    assert "reads -5," in (not_a_measurement("X", [-5.0], 100) or "")
    assert "reads 1.5," in (not_a_measurement("DCGM_FI_PROF_GR_ENGINE_ACTIVE", [1.5], 1) or "")


def test_choose_takes_checked_values_as_they_are() -> None:
    # GPU_UTIL 100 % -> 1.0 exactly; profiling 0 with GPU_UTIL 30 % (not busy) -> 0.
    assert choose(None, 100.0).utilization == 1.0
    assert choose(0.0, 30.0).utilization == 0.0


def test_each_gpu_is_checked_for_the_silent_zero_before_the_mean() -> None:
    from app.planning.dcgm import choose_gpus

    # GPU 0: profiling 0.80. GPU 1: profiling 0.00 while GPU_UTIL 90 %: 0.90.
    # (0.80 + 0.90) / 2 = 0.85, where the mean of the profiling series reads 0.40.
    picked = choose_gpus([(0.80, 85.0), (0.0, 90.0)])
    assert (picked.utilization, picked.source) == (0.85, "dcgm_gpu_util")
    assert "1 of 2 GPUs" in picked.note
    # An idle GPU (profiling 0, GPU_UTIL 5 %) is idle, not silent: (0.8 + 0) / 2 = 0.4.
    idle = choose_gpus([(0.80, 85.0), (0.0, 5.0)])
    assert (idle.utilization, idle.source, idle.note) == (0.4, "dcgm_gr_engine_active", "")
    assert choose_gpus([]).utilization is None


def test_coverage_below_ninety_percent_is_noted() -> None:
    from app.planning.dcgm import coverage_note

    # 2 GPUs, 60 of 121 points each: 120 / 242 = 49.6 % -> "50%", flagged.
    assert "cover 50%" in coverage_note([60, 60], 121)
    # 110 of 121 = 90.9 %: whole enough.
    assert coverage_note([110, 110], 121) == ""
    assert coverage_note([], 121) == ""


def test_mig_slices_are_weighed_by_their_size() -> None:
    # A 3g.40gb slice (3/7 of an A100) at 0.90 and a 1g.10gb slice (1/7) at 0.10:
    # (3/7 x 0.90 + 1/7 x 0.10) / (4/7) = (2.7 + 0.1) / 4 = 0.70; unweighed 0.50.
    picked = choose_gpus([(0.90, None), (0.10, None)], [3 / 7, 1 / 7])
    assert picked.utilization == pytest.approx(0.70)
    assert choose_gpus([(0.90, None), (0.10, None)]).utilization == pytest.approx(0.50)


def test_coverage_is_the_share_of_the_windows_points_held() -> None:
    # 2 GPUs with 60 and 60 of 121 points: 120 / 242 = 0.4959; a series holding more
    # points than expected counts as whole, not more.
    assert coverage([60, 60], 121) == pytest.approx(120 / 242)
    assert coverage([130], 121) == 1.0
    assert coverage([], 121) is None and coverage([5], 0) is None
