"""Warnings when compared runs measured utilization differently.

"GPU utilization" is not one metric: NVML's and DCGM's ``utilization.gpu`` count the
time any kernel ran, DCGM's SM activity and graphics-engine activity count how much of
the chip was busy, and MFU counts useful FLOPs. A run at 90% ``nvml_gpu_util`` can be at
40% ``dcgm_sm_active``, so a gate uplift or a weekly trend across sources compares
different things. Pure: counts in, sentences out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

UNKNOWN = "unknown"


def count_sources(sources: Iterable[str | None]) -> dict[str, int]:
    """Runs per source, ``None`` counted as ``unknown``."""
    counts: dict[str, int] = {}
    for source in sources:
        key = source or UNKNOWN
        counts[key] = counts.get(key, 0) + 1
    return counts


def _describe(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{s} ({n} run{'s' if n != 1 else ''})" for s, n in sorted(counts.items()))


def mixed_sources_warning(counts: Mapping[str, int], what: str) -> str | None:
    """One sentence when the runs behind ``what`` mix utilization sources, else None.

    Two or more named sources always warrant it; named and unknown together do too
    (the unknown runs may be either). Runs that all say nothing are left alone: there
    is nothing to tell them apart by.
    """
    named = {s: n for s, n in counts.items() if s != UNKNOWN and n > 0}
    if len(named) >= 2:
        unknown = counts.get(UNKNOWN, 0)
        also = f", and {_describe({UNKNOWN: unknown})}" if unknown else ""
        return (
            f"{what} compares runs whose utilization was measured differently: "
            f"{_describe(named)}{also}. "
            "These metrics are not interchangeable, so utilization differences may be "
            "the metric's, not the job's."
        )
    if named and counts.get(UNKNOWN):
        return (
            f"{what} mixes runs with a utilization source ({_describe(named)}) and runs "
            f"without one ({counts[UNKNOWN]}); send utilization_source with every run to be "
            "sure they measure the same thing."
        )
    return None


def gate_source_warnings(
    baseline: Iterable[str | None], candidate: Iterable[str | None]
) -> list[str]:
    """The gate compares two arms: warn when, together, they mix sources."""
    base, cand = count_sources(baseline), count_sources(candidate)
    both = dict(base)
    for source, n in cand.items():
        both[source] = both.get(source, 0) + n
    warning = mixed_sources_warning(both, "The gate")
    if warning is None:
        return []
    arms = f" (baseline: {_describe(base)}; candidate: {_describe(cand)})"
    return [warning + arms]


def trend_source_warnings(runs_per_source: Mapping[str | None, int]) -> list[str]:
    """The weekly goodput trend: warn when its weeks' runs mix sources."""
    counts = {(s or UNKNOWN): n for s, n in runs_per_source.items()}
    warning = mixed_sources_warning(counts, "The goodput trend")
    return [] if warning is None else [warning]
