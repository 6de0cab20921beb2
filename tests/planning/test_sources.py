"""Warnings for runs whose utilization was measured by different metrics."""

from __future__ import annotations

from app.planning.sources import (
    count_sources,
    gate_source_warnings,
    mixed_sources_warning,
    trend_source_warnings,
)


def test_count_sources_names_missing_ones_unknown() -> None:
    assert count_sources(["mfu", None, "mfu"]) == {"mfu": 2, "unknown": 1}


def test_one_source_or_none_at_all_needs_no_warning() -> None:
    assert mixed_sources_warning({"dcgm_sm_active": 5}, "The gate") is None
    assert mixed_sources_warning({"unknown": 5}, "The gate") is None
    assert gate_source_warnings(["mfu", "mfu"], ["mfu"]) == []
    assert gate_source_warnings([None, None], [None]) == []


def test_two_sources_across_the_arms_warn_with_each_arms_counts() -> None:
    [warning] = gate_source_warnings(
        ["nvml_gpu_util"] * 3, ["dcgm_sm_active"] * 2 + ["nvml_gpu_util"]
    )
    assert warning.startswith(
        "The gate compares runs whose utilization was measured differently: "
        "dcgm_sm_active (2 runs), nvml_gpu_util (4 runs)."
    )
    assert "(baseline: nvml_gpu_util (3 runs); candidate: dcgm_sm_active (2 runs), " in warning


def test_named_and_unknown_sources_together_ask_for_the_source() -> None:
    [warning] = trend_source_warnings({"mfu": 4, None: 1})
    assert warning == (
        "The goodput trend mixes runs with a utilization source (mfu (4 runs)) and runs "
        "without one (1); send utilization_source with every run to be sure they measure "
        "the same thing."
    )
    assert trend_source_warnings({"mfu": 4}) == []
