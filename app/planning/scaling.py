"""Scaling probe: speedup, efficiency and Gunther's Universal Scalability Law.

See docs/methodology.md §6."""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

import numpy as np
from scipy.optimize import least_squares

from app.planning.model import PlanningError

_MAX_COEFF = 1.0 - 1e-9


@dataclass(frozen=True)
class ScalingPoint:
    """One probe run: the job at ``workers`` workers took ``wall_clock_hours``."""

    workers: int
    wall_clock_hours: float

    def __post_init__(self) -> None:
        if self.workers < 1 or not (
            self.wall_clock_hours > 0 and math.isfinite(self.wall_clock_hours)
        ):
            raise PlanningError("a scaling point needs workers >= 1 and wall clock > 0")


@dataclass(frozen=True)
class ScalingRow:
    """Median wall clock at one worker count, with speedup and efficiency against N0."""

    workers: int
    wall_clock_hours: float
    runs: int
    speedup: float
    efficiency: float
    gpu_hours: float


def _medians(points: Iterable[ScalingPoint]) -> dict[int, tuple[float, int]]:
    by_n: dict[int, list[float]] = defaultdict(list)
    for p in points:
        by_n[p.workers].append(p.wall_clock_hours)
    return {n: (statistics.median(ts), len(ts)) for n, ts in sorted(by_n.items())}


def scaling_table(points: Iterable[ScalingPoint]) -> list[ScalingRow]:
    """Per worker count N (several runs at one N -> median T), relative to the smallest N0:

    speedup S(N) = T(N0) / T(N); efficiency E(N) = S(N) * N0 / N; GPU-hours = N * T(N).
    """
    med = _medians(points)
    if not med:
        return []
    n0 = min(med)
    t0 = med[n0][0]
    rows = []
    for n, (t, count) in med.items():
        speedup = t0 / t
        rows.append(ScalingRow(n, t, count, speedup, speedup * n0 / n, n * t))
    return rows


def usl_capacity(n: float, s: float, k: float) -> float:
    """Gunther's USL relative capacity C(N) = N / (1 + s (N - 1) + k N (N - 1))."""
    return n / (1.0 + s * (n - 1.0) + k * n * (n - 1.0))


@dataclass(frozen=True)
class ScalingModel:
    """Wall clock as a function of workers: T(N) = T1 / C(N) with C the USL capacity.

    ``kind`` is "usl" (3+ worker counts, s and k fitted) or "amdahl" (2 counts, k = 0).
    ``t1_hours`` is the implied single-worker time. Predictions outside
    [min_workers, max_workers] are extrapolations (see :meth:`is_extrapolation`).
    """

    kind: Literal["usl", "amdahl"]
    s: float
    k: float
    t1_hours: float
    min_workers: int
    max_workers: int
    rms_log_error: float
    notes: tuple[str, ...] = ()

    def capacity(self, n: float) -> float:
        """C(N) = N / (1 + s (N - 1) + k N (N - 1))."""
        return usl_capacity(n, self.s, self.k)

    def predict_wall_clock(self, n: float) -> float:
        """T(N) = T1 / C(N), hours; equivalently T(N) = T(N0) * C(N0) / C(N)."""
        if n < 1:
            raise PlanningError("workers must be >= 1")
        return self.t1_hours / self.capacity(n)

    def predict_gpu_hours(self, n: float) -> float:
        """G(N) = N * T(N)."""
        return n * self.predict_wall_clock(n)

    def is_extrapolation(self, n: float) -> bool:
        """True when N lies outside the probed worker counts."""
        return n < self.min_workers or n > self.max_workers

    @property
    def peak_workers(self) -> float | None:
        """N* = sqrt((1 - s) / k), where capacity peaks (USL); None when k = 0."""
        if self.k <= 0:
            return None
        return math.sqrt((1.0 - self.s) / self.k)


def _amdahl(n1: int, t1: float, n2: int, t2: float) -> ScalingModel:
    """Solve Amdahl's s from two points: C(N2)/C(N1) = T1/T2 with C(N) = N / (1 + s(N-1)).

    r = N2/N1, S = T1/T2: r (1 + s(N1-1)) = S (1 + s(N2-1)) => s = (r - S) / (S(N2-1) - r(N1-1)).
    """
    r, speedup = n2 / n1, t1 / t2
    denom = speedup * (n2 - 1) - r * (n1 - 1)
    notes = []
    s = (r - speedup) / denom if denom > 0 else _MAX_COEFF
    if s < 0:
        s = 0.0
        notes.append("Superlinear speedup: clamped to perfect scaling (s = 0).")
    elif s > _MAX_COEFF:
        s = _MAX_COEFF
        notes.append("More workers made the job slower; Amdahl cannot express that (s -> 1).")
    notes.append("Two worker counts: Amdahl's law (k = 0); probe a third count for a USL fit.")
    scale = t1 * usl_capacity(n1, s, 0.0)
    err = [math.log(scale / usl_capacity(n, s, 0.0) / t) for n, t in ((n1, t1), (n2, t2))]
    return ScalingModel("amdahl", s, 0.0, scale, n1, n2, _rms(err), tuple(notes))


def _rms(values: list[float]) -> float:
    return math.sqrt(sum(v * v for v in values) / len(values))


def fit_usl(points: Iterable[ScalingPoint]) -> ScalingModel | None:
    """Fit T(N) = T1 / C(N), C(N) = N / (1 + s (N-1) + k N (N-1)) (Gunther's USL).

    Multiple runs at one N are reduced to their median first. With 3+ distinct worker
    counts: bounded least squares (scipy ``least_squares``, s and k in [0, 1)) on
    log T(N), i.e. on relative error, from a few starting points, keeping the best.
    With exactly 2 counts: Amdahl (k = 0) solved exactly through both points,
    ``kind="amdahl"``. Fewer: None.
    """
    med = _medians(points)
    if len(med) < 2:
        return None
    ns = sorted(med)
    return _fit_medians(tuple(ns), tuple(med[n][0] for n in ns))


@lru_cache(maxsize=512)
def _fit_medians(ns: tuple[int, ...], times: tuple[float, ...]) -> ScalingModel:
    """The fit for median wall clocks ``times`` at worker counts ``ns`` (memoised: a
    dashboard asks for the same pipeline's fit on every view, ~10 ms each)."""
    if len(ns) == 2:
        return _amdahl(ns[0], times[0], ns[1], times[1])
    n_arr = np.array(ns, dtype=float)
    log_t = np.log(np.array(times))

    def residuals(x: np.ndarray) -> np.ndarray:
        log_t1, s, k = x
        denom = 1.0 + s * (n_arr - 1.0) + k * n_arr * (n_arr - 1.0)
        return np.asarray(log_t1 - np.log(n_arr) + np.log(denom) - log_t)

    lower, upper = [-np.inf, 0.0, 0.0], [np.inf, _MAX_COEFF, _MAX_COEFF]
    best = None
    for s0, k0 in ((0.05, 1e-4), (0.3, 1e-3), (0.01, 1e-2), (0.5, 0.0)):
        log_t10 = float(log_t[0] + np.log(usl_capacity(ns[0], s0, k0)))
        res = least_squares(
            residuals,
            x0=[log_t10, s0, k0],
            bounds=(lower, upper),
            x_scale=[1.0, 0.1, 1e-3],
            xtol=1e-12,
            ftol=1e-12,
            gtol=1e-12,
            max_nfev=2000,
        )
        if best is None or float(res.cost) < float(best.cost):
            best = res
    assert best is not None
    log_t1, s, k = (float(v) for v in best.x)
    s, k = (0.0 if s < 1e-12 else s), (0.0 if k < 1e-12 else k)  # solver noise at the bound
    rms = _rms([float(v) for v in residuals(best.x)])
    notes = [f"USL fit to {len(ns)} worker counts ({ns[0]}..{ns[-1]}): s = {s:.3g}, k = {k:.3g}."]
    if k > 0:
        notes.append(f"Capacity peaks near {math.sqrt((1 - s) / k):.0f} workers.")
    return ScalingModel("usl", s, k, math.exp(log_t1), ns[0], ns[-1], rms, tuple(notes))


MIN_UTILIZATION_TO_SCALE = 0.8
"""Below this busy fraction the GPUs wait on something else: more of them wait too."""
MIN_EFFICIENCY_TO_SCALE = 0.8
"""Below this scaling efficiency extra workers cost more than +25% GPU-hours (1/E)."""


def scaling_cost_change(efficiency: float) -> float:
    """Relative change in GPU-hours per run when scaling at efficiency E: 1/E - 1.

    G(N) = N T(N) and T(N) = T(N0) N0 / (N E), so G(N) / G(N0) = 1 / E (E = 0.75: +33%).
    """
    if not efficiency > 0:
        raise PlanningError("efficiency must be > 0")
    return 1.0 / efficiency - 1.0


def scaling_advice(
    utilization: float,
    efficiency_at_max: float | None,
    *,
    min_utilization: float = MIN_UTILIZATION_TO_SCALE,
    min_efficiency: float = MIN_EFFICIENCY_TO_SCALE,
    model: ScalingModel | None = None,
    monthly_gpu_hours: float | None = None,
    price_per_gpu_hour: float | None = None,
) -> list[str]:
    """Plain advice on adding workers (methodology.md §6), with the same thresholds as the
    ranked levers (:data:`MIN_UTILIZATION_TO_SCALE`, :data:`MIN_EFFICIENCY_TO_SCALE`).

    Don't add workers while utilization < ``min_utilization`` or the efficiency E at the
    largest probed count < ``min_efficiency``. Whenever E is known the advice states the
    GPU-hour change 1/E - 1 and, given this month's GPU-hours and a price, its dollars
    (:func:`scaling_change_words`).
    """
    advice: list[str] = []
    change = ""
    if efficiency_at_max is not None and efficiency_at_max > 0:
        change = scaling_change_words(efficiency_at_max, monthly_gpu_hours, price_per_gpu_hour)
    if utilization < min_utilization:
        advice.append(
            f"Utilization is {utilization:.0%} (below {min_utilization:.0%}): the GPUs are "
            "starved, so more workers mostly add idle GPU-hours. Fix input stalls first."
            + (change if efficiency_at_max and efficiency_at_max >= min_efficiency else "")
        )
    if efficiency_at_max is None:
        advice.append("No scaling probe yet: run the job at 2-3 worker counts before scaling.")
    elif efficiency_at_max < min_efficiency:
        advice.append(
            f"Scaling efficiency is {efficiency_at_max:.0%} at the largest probed count "
            f"(below {min_efficiency:.0%}): extra workers cost more than the time they save."
            + change
        )
    if not advice:
        msg = (
            f"Utilization {utilization:.0%} and efficiency {efficiency_at_max:.0%} are high: "
            "adding workers shortens wall clock." + change
        )
        peak = model.peak_workers if model is not None else None
        if peak is not None:
            msg += f" Capacity peaks near {peak:.0f} workers; stay well below that."
        advice.append(msg)
    return advice


def scaling_change_words(
    efficiency: float, monthly_gpu_hours: float | None, price_per_gpu_hour: float | None
) -> str:
    """What scaling at efficiency E costs, in words: GPU-hours change by 1/E - 1, and in
    dollars a month given the month's GPU-hours and a price (methodology.md §6: say the
    dollars). Example: E = 0.75, 485.3 GPU-h a month at $2: +33% GPU-hours = +$324 a
    month (+162 GPU-h), since 485.3 x (1/0.75 - 1) = 161.8 GPU-h x $2 = $323.6."""
    rel = scaling_cost_change(efficiency)
    words = f" At {efficiency:.0%} efficiency: {rel:+.0%} GPU-hours"
    if monthly_gpu_hours is not None and price_per_gpu_hour is not None:
        extra = monthly_gpu_hours * rel
        usd = extra * price_per_gpu_hour
        sign = "-" if usd < 0 else "+"
        words += f" = {sign}${abs(usd):,.0f} a month ({extra:+,.0f} GPU-h)"
    return words + "."
