"""Failures and checkpoint intervals (methodology.md §4; Young 1974, Daly 2006, Meta's ETTR)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from scipy.stats import chi2

from app.planning.durations import duration
from app.planning.model import PlanningError

DEFAULT_FAILURE_RATE = 4e-4
"""Planning default: failures per instance-hour (public large-scale logs: ~1e-5 to 6e-4)."""


def cluster_mtbf_hours(instances: int, failure_rate_per_instance_hour: float) -> float:
    """Cluster mean time between failures M = 1 / (n * lambda) in hours (methodology.md §4).

    512 instances at 4e-4 per instance-hour: M = 1 / 0.2048 = 4.88 h. Infinite if lambda = 0.
    """
    if instances < 1 or failure_rate_per_instance_hour < 0:
        raise PlanningError("instances must be >= 1 and the failure rate >= 0")
    if failure_rate_per_instance_hour == 0:
        return math.inf
    return 1.0 / (instances * failure_rate_per_instance_hour)


def expected_failures(wall_clock_hours: float, mtbf: float) -> float:
    """Expected failures in a run of T hours: T / M (methodology.md §4)."""
    if wall_clock_hours < 0 or mtbf <= 0:
        raise PlanningError("wall clock must be >= 0 and MTBF > 0")
    return wall_clock_hours / mtbf


def expected_loss_per_failure(interval: float, resume: float, reschedule: float) -> float:
    """Wall-clock hours lost per failure: interval / 2 + resume + reschedule (methodology.md §4).

    On average a failure lands half-way between checkpoints, so half an interval of
    progress is redone. Multiply by the workers to get GPU-hours.
    """
    if min(interval, resume, reschedule) < 0:
        raise PlanningError("interval, resume and reschedule must be >= 0")
    return interval / 2.0 + resume + reschedule


def young_interval(d: float, mtbf: float) -> float:
    """Young's (1974) optimal checkpoint interval tau = sqrt(2 d M), in hours.

    d is the blocking checkpoint write time, M the cluster MTBF.
    """
    if d < 0 or mtbf <= 0:
        raise PlanningError("d must be >= 0 and MTBF > 0")
    return math.sqrt(2.0 * d * mtbf)


def daly_interval(d: float, mtbf: float) -> float:
    """Daly's (2006) higher-order optimum, in hours (methodology.md §4).

    tau = sqrt(2 d M) * (1 + sqrt(d / (2M)) / 3 + (d / (2M)) / 9) - d   for d < 2M,
    tau = M                                                            otherwise.
    Check: d = 5 min, M = 24 h gives sqrt(4) * 1.01408 - 0.0833 = 1.945 h, about 117 min.
    """
    if d < 0 or mtbf <= 0:
        raise PlanningError("d must be >= 0 and MTBF > 0")
    if d >= 2.0 * mtbf:
        return mtbf
    x = d / (2.0 * mtbf)
    return math.sqrt(2.0 * d * mtbf) * (1.0 + math.sqrt(x) / 3.0 + x / 9.0) - d


def ettr(interval: float, restart_overhead: float, d: float, mtbf: float) -> float:
    """Expected effective-training-time ratio (Meta's ETTR model, methodology.md §4).

    ETTR = (1 - (u0 + c / 2) / M) / (1 + d / c) for checkpoint interval c, restart
    overhead u0 (resume + reschedule) and blocking write time d; clamped to [0, 1].
    """
    if interval <= 0 or restart_overhead < 0 or d < 0 or mtbf <= 0:
        raise PlanningError("interval and MTBF must be > 0; overhead and d >= 0")
    value = (1.0 - (restart_overhead + interval / 2.0) / mtbf) / (1.0 + d / interval)
    return min(1.0, max(0.0, value))


def checkpoint_overhead_hours(
    interval: float, d: float, mtbf: float, wall_clock_hours: float, restart_overhead: float
) -> tuple[float, float]:
    """Wall-clock hours per run spent (writing checkpoints, recovering from failures).

    writes = (T / c) * d; failures = (T / M) * (c / 2 + u0). First-order, like Young's model.
    Limits: c = 0 with d = 0 writes nothing; M = inf (no failures) loses nothing.
    """
    if interval < 0 or d < 0 or mtbf <= 0 or wall_clock_hours < 0 or restart_overhead < 0:
        raise PlanningError("interval, d, wall clock, overhead must be >= 0 and MTBF > 0")
    if d == 0:
        writes = 0.0
    elif interval == 0:
        writes = math.inf
    else:
        writes = wall_clock_hours / interval * d
    failures = (
        0.0 if math.isinf(mtbf) else wall_clock_hours / mtbf * (interval / 2 + restart_overhead)
    )
    return writes, failures


@dataclass(frozen=True)
class CheckpointAdvice:
    """Current checkpoint interval against the Young and Daly optima, per run and per month.

    GPU-hour figures are wall-clock hours times the GPUs the run pays for (``workers``, W
    or G / T), never times the instance count. "overhead" = checkpoint writes
    + expected failure loss; ``monthly_gpu_hours_saved`` is (current - Daly) overhead x
    runs per month (negative means the current interval is already better). Intervals are
    ``inf`` when the failure rate is 0 (never checkpoint for failures' sake).
    """

    mtbf_hours: float
    current_interval_hours: float
    young_interval_hours: float
    daly_interval_hours: float
    ettr_current: float
    ettr_optimal: float
    expected_failures_per_run: float
    failure_loss_gpu_hours_per_run: float
    write_gpu_hours_per_run: float
    overhead_gpu_hours_per_run_current: float
    overhead_gpu_hours_per_run_optimal: float
    monthly_gpu_hours_saved: float
    monthly_usd_saved: float
    notes: tuple[str, ...]


def checkpoint_advice(
    *,
    write_hours: float,
    current_interval_hours: float,
    workers: float,
    wall_clock_hours: float,
    runs_per_month: float,
    price_per_gpu_hour: float,
    failure_rate_per_instance_hour: float = DEFAULT_FAILURE_RATE,
    resume_hours: float = 0.0,
    reschedule_hours: float = 0.0,
    instances: int | None = None,
) -> CheckpointAdvice:
    """Compare the current interval with Young's and Daly's optima (methodology.md §4).

    Instances (failure domains) set the MTBF only: M = 1 / (instances * lambda), with
    ``instances`` defaulting to one per paid GPU. ``workers`` is what the run pays for
    (W, or G / T) and turns wall-clock hours into GPU-hours. u0 = resume +
    reschedule; d = ``write_hours`` per checkpoint. Per run,
    overhead(c) = workers * [(T / c) * d + (T / M) * (c / 2 + u0)] GPU-hours, and the
    monthly saving is (overhead(current) - overhead(Daly)) * runs per month, in GPU-hours
    and, at ``price_per_gpu_hour``, in USD. ETTR as in :func:`ettr` (1 / (1 + d/c) when
    nothing fails).
    """
    if current_interval_hours <= 0 or wall_clock_hours <= 0 or runs_per_month < 0:
        raise PlanningError("interval and wall clock must be > 0, runs per month >= 0")
    if write_hours < 0 or resume_hours < 0 or reschedule_hours < 0 or price_per_gpu_hour < 0:
        raise PlanningError("write, resume, reschedule hours and price must be >= 0")
    if not workers > 0:
        raise PlanningError("workers (paid GPUs) must be > 0")
    n_instances = instances if instances is not None else max(1, round(workers))
    mtbf = cluster_mtbf_hours(n_instances, failure_rate_per_instance_hour)
    mtbf_note = (
        f"M = 1/({n_instances} instances x {failure_rate_per_instance_hour:g}) = {duration(mtbf)}"
    )
    return _advice(
        mtbf,
        mtbf_note,
        write_hours=write_hours,
        current_interval_hours=current_interval_hours,
        workers=workers,
        t=wall_clock_hours,
        runs_per_month=runs_per_month,
        price_per_gpu_hour=price_per_gpu_hour,
        u0=resume_hours + reschedule_hours,
    )


def _advice(
    mtbf: float,
    mtbf_note: str,
    *,
    write_hours: float,
    current_interval_hours: float,
    workers: float,
    t: float,
    runs_per_month: float,
    price_per_gpu_hour: float,
    u0: float,
) -> CheckpointAdvice:
    """:func:`checkpoint_advice` once the inputs are checked and the MTBF is known."""
    notes = ["Failure rate is 0: failures never force a checkpoint."] if math.isinf(mtbf) else []
    young, daly, ettr_cur, ettr_opt = _intervals(mtbf, write_hours, current_interval_hours, u0)
    writes, fails = checkpoint_overhead_hours(current_interval_hours, write_hours, mtbf, t, u0)
    overhead_cur = (writes + fails) * workers
    overhead_opt = _overhead_at(daly, write_hours, mtbf, t, u0) * workers
    saved = (overhead_cur - overhead_opt) * runs_per_month
    failures_per_run = 0.0 if math.isinf(mtbf) else t / mtbf
    notes.append(
        f"{mtbf_note}; "
        f"Young sqrt(2dM) = {duration(young)}, Daly = {duration(daly)}, "
        f"current = {duration(current_interval_hours)}."
    )
    notes.append(
        f"Per run: {duration(writes)} writing + {duration(fails)} expected failure loss, "
        f"x {workers:.4g} paid GPUs = {overhead_cur:.1f} GPU-h; at the Daly interval "
        f"{overhead_opt:.1f} GPU-h; x {runs_per_month:.3g} runs/month = {saved:.1f} GPU-h "
        f"(${saved * price_per_gpu_hour:,.0f}) saved."
    )
    return CheckpointAdvice(
        mtbf_hours=mtbf,
        current_interval_hours=current_interval_hours,
        young_interval_hours=young,
        daly_interval_hours=daly,
        ettr_current=ettr_cur,
        ettr_optimal=ettr_opt,
        expected_failures_per_run=failures_per_run,
        failure_loss_gpu_hours_per_run=fails * workers,
        write_gpu_hours_per_run=writes * workers,
        overhead_gpu_hours_per_run_current=overhead_cur,
        overhead_gpu_hours_per_run_optimal=overhead_opt,
        monthly_gpu_hours_saved=saved,
        monthly_usd_saved=saved * price_per_gpu_hour,
        notes=tuple(notes),
    )


def _intervals(
    mtbf: float, write_hours: float, current_interval_hours: float, u0: float
) -> tuple[float, float, float, float]:
    """Young's and Daly's intervals, and the ETTR at the current interval and at Daly's
    (no failures: both intervals infinite, only the writes cost time)."""
    if math.isinf(mtbf):
        return math.inf, math.inf, 1.0 / (1.0 + write_hours / current_interval_hours), 1.0
    young = young_interval(write_hours, mtbf)
    daly = max(0.0, daly_interval(write_hours, mtbf))
    ettr_cur = ettr(current_interval_hours, u0, write_hours, mtbf)
    ettr_opt = ettr(daly, u0, write_hours, mtbf) if daly > 0 else max(0.0, 1.0 - u0 / mtbf)
    return young, daly, ettr_cur, ettr_opt


def _overhead_at(daly: float, write_hours: float, mtbf: float, t: float, u0: float) -> float:
    """Wall-clock hours per run of writes and failures at Daly's interval (0 when infinite)."""
    if math.isinf(daly):
        return 0.0
    writes, fails = checkpoint_overhead_hours(daly, write_hours, mtbf, t, u0)
    return writes + fails


def write_hours_per_checkpoint(
    checkpoint_hours: float, wall_clock_hours: float, interval: float
) -> float:
    """d estimated from a run: total blocking checkpoint hours / (T / interval) checkpoints."""
    if wall_clock_hours <= 0 or interval <= 0:
        raise PlanningError("wall clock and interval must be > 0")
    return checkpoint_hours / max(1.0, wall_clock_hours / interval)


@dataclass(frozen=True)
class FailureRateEstimate:
    """Failures per instance-hour: MLE with a two-sided Poisson confidence interval."""

    rate: float
    lower: float
    upper: float
    events: int
    instance_hours: float
    confidence: float
    sufficient: bool
    note: str


def estimate_failure_rate(
    interruption_count: int,
    instance_hours: float,
    min_events: int = 3,
    confidence: float = 0.95,
) -> FailureRateEstimate | None:
    """lambda = k / exposure with the exact (chi-square) Poisson interval (Garwood 1936):

    lower = chi2.ppf(a/2, 2k) / (2 * exposure)   (0 when k = 0)
    upper = chi2.ppf(1 - a/2, 2k + 2) / (2 * exposure),   a = 1 - confidence.

    Returns None when there is no exposure; ``sufficient`` is False (and the note says use
    the planning default) when fewer than ``min_events`` failures were seen.
    """
    if interruption_count < 0:
        raise PlanningError("interruption_count must be >= 0")
    if instance_hours <= 0:
        return None
    k = interruption_count
    a = 1.0 - confidence
    lower = 0.0 if k == 0 else float(chi2.ppf(a / 2.0, 2 * k)) / (2.0 * instance_hours)
    upper = float(chi2.ppf(1.0 - a / 2.0, 2 * k + 2)) / (2.0 * instance_hours)
    rate = k / instance_hours
    sufficient = k >= min_events
    if sufficient:
        note = f"{k} failures in {instance_hours:,.0f} instance-hours: {rate:.2g}/h."
    else:
        note = (
            f"Only {k} failures in {instance_hours:,.0f} instance-hours (< {min_events}); "
            f"the rate is uncertain (up to {upper:.2g}/h): plan with the default "
            f"{DEFAULT_FAILURE_RATE:g}/h."
        )
    return FailureRateEstimate(rate, lower, upper, k, instance_hours, confidence, sufficient, note)
