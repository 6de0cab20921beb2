"""A run's utilization from DCGM series over its window. Pure: numbers in, a choice out.

``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` (0..1) says how much of the time the graphics engine
was busy; ``DCGM_FI_DEV_GPU_UTIL`` (0..100) says how much of the time any kernel ran, an
upper bound. The profiling metric is preferred, and GPU_UTIL / 100 stands in when it is
absent (profiling is off by default on some exporters, needs Volta or newer:
dcgm-exporter #395, #400). One failure is silent: the profiling metric can read 0 for
weeks while the GPU works (dcgm-exporter #662). A window whose profiling mean is at most
``SILENT_ZERO`` while GPU_UTIL's mean is above ``BUSY`` uses GPU_UTIL, and says so.

A value no GPU can read (+Inf, NaN, below 0, a profiling ratio above 1, GPU_UTIL above
100 %) is not a measurement: the run is left unenriched with the series and the value
named (``not_a_measurement``), never clamped to 0 or 100 %.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

SILENT_ZERO = 0.01  # a profiling mean this small is "about 0"
BUSY = 0.50  # ...while GPU_UTIL says the GPU ran kernels more than half the time


@dataclass(frozen=True)
class Choice:
    utilization: float | None
    source: str | None  # utilization_source: dcgm_gr_engine_active | dcgm_gpu_util
    note: str = ""
    coverage: float | None = None  # share of the run's wall clock the series cover


def not_a_measurement(series: str, values: Iterable[float], highest: float) -> str | None:
    """Why a window's values are not a measurement, naming the first bad value; None
    when every value lies in 0..``highest`` (1 for the profiling ratio, 100 for
    GPU_UTIL's percent). Worked: GPU_UTIL [40, 5000] -> "... reads 5000 ..."; [+Inf]
    -> "... reads inf ..."; [NaN] and [-5] likewise; [0, 100] -> None."""
    for value in values:
        if not 0 <= value <= highest:  # NaN compares false: refused too
            return (
                f"{series} reads {value:g}, not a measurement (a value from 0 to "
                f"{highest:g}): the run is not enriched"
            )
    return None


def window_mean(values: Iterable[float]) -> float | None:
    """The mean of a window's evaluated points (each the mean over the run's GPUs); a
    window checked by ``not_a_measurement`` holds no NaN, which is skipped otherwise."""
    points = [v for v in values if v == v]
    return sum(points) / len(points) if points else None


def choose(profiling: float | None, gpu_util_percent: float | None) -> Choice:
    """The utilization to store from the two window means (profiling 0..1, GPU_UTIL in
    percent). Worked: profiling 0.42 -> 0.42 engine-active; no profiling and GPU_UTIL
    87 % -> 0.87; profiling 0.003 with GPU_UTIL 91 % -> 0.91, noted. The means come
    from values ``not_a_measurement`` passed, so both already lie in their range."""
    util = None if gpu_util_percent is None else gpu_util_percent / 100
    if profiling is not None:
        if profiling <= SILENT_ZERO and util is not None and util > BUSY:
            note = (
                f"DCGM_FI_PROF_GR_ENGINE_ACTIVE reads {profiling:.3f} while "
                f"DCGM_FI_DEV_GPU_UTIL reads {util:.0%}: the profiling metric looks "
                "silently off (dcgm-exporter #662); used DCGM_FI_DEV_GPU_UTIL"
            )
            return Choice(round(util, 6), "dcgm_gpu_util", note)
        return Choice(round(profiling, 6), "dcgm_gr_engine_active")
    if util is not None:
        return Choice(round(util, 6), "dcgm_gpu_util", "no profiling series: used GPU_UTIL")
    return Choice(None, None, "no DCGM series in the run's window")


MIN_COVERAGE = 0.90  # series covering less of the run's wall clock are flagged


def choose_gpus(
    gpus: list[tuple[float | None, float | None]], weights: list[float] | None = None
) -> Choice:
    """Each GPU's choice first (so a silent zero on one GPU of two is caught), then the
    mean of the GPUs', each weighed by its size in whole GPUs (a MIG slice: 3g is 3/7 of
    an A100). Worked: GPU 0 profiling 0.80; GPU 1 profiling 0.00 while its GPU_UTIL
    reads 90 %: (0.80 + 0.90) / 2 = 0.85, noted, where the mean of the profiling series,
    (0.80 + 0.00) / 2 = 0.40, would have hidden it. A 3g.40gb slice at 0.90 and a 1g.10gb
    slice at 0.10: (3/7 x 0.90 + 1/7 x 0.10) / (4/7) = 2.8 / 4 = 0.70, not 0.50."""
    sizes = weights or [1.0] * len(gpus)
    picks = [choose(p, u) for p, u in gpus]
    got = [(c, w) for c, w in zip(picks, sizes, strict=True) if c.utilization is not None]
    if not got:
        return Choice(None, None, "no DCGM series in the run's window")
    total = sum(w for _, w in got)
    mean = round(sum((c.utilization or 0.0) * w for c, w in got) / total, 6)
    silent = [i for i, c in enumerate(picks) if c.note and "silently" in c.note]
    engine = all(c.source == "dcgm_gr_engine_active" for c, _ in got)
    source = "dcgm_gr_engine_active" if engine else "dcgm_gpu_util"
    if silent:
        note = (
            f"DCGM_FI_PROF_GR_ENGINE_ACTIVE reads about 0 on {len(silent)} of {len(picks)} "
            "GPUs while their DCGM_FI_DEV_GPU_UTIL is above 50% (dcgm-exporter #662): "
            "used DCGM_FI_DEV_GPU_UTIL for them"
        )
        return Choice(mean, source, note)
    return Choice(mean, source, "" if engine else got[0][0].note)


def coverage(points: list[int], expected: int) -> float | None:
    """The share of the window the GPUs' series cover: points held over points the
    window evaluates, across the GPUs. Worked: 2 GPUs with 60 and 60 of 121 points:
    120 / 242 = 0.496; None when nothing is expected or held."""
    if expected <= 0 or not points:
        return None
    return sum(min(p, expected) for p in points) / (expected * len(points))


def coverage_note(points: list[int], expected: int) -> str:
    """A note when the GPUs' series cover less than ``MIN_COVERAGE`` of the window.
    Worked: 2 GPUs with 60 and 60 of 121 points: 120 / 242 = 50%: flagged."""
    share = coverage(points, expected)
    if share is None or share >= MIN_COVERAGE:
        return ""
    return (
        f"the DCGM series cover {share:.0%} of the run's wall clock (below "
        f"{MIN_COVERAGE:.0%}): the mean is of that part only"
    )
