"""What-if adjustments to one observed run (methodology.md §5)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from app.planning.failures import expected_loss_per_failure
from app.planning.model import PlanningError, RunFacts
from app.planning.scaling import ScalingModel


@dataclass(frozen=True)
class WhatIf:
    """Hypothetical changes to apply to observed runs before projecting their cost.

    - ``price``: USD per GPU-hour replacing each run's own price.
    - ``utilization_target``: fraction in (0, 1]; G and T scale by u_now / u_target.
    - ``workers``: new worker count, applied through a :class:`ScalingModel`.
    - ``failure_rate_per_instance_hour``: replaces the recorded failure loss with the
      expected loss at this rate; needs ``checkpoint_interval_hours`` (and uses
      ``resume_hours`` / ``reschedule_hours``). ``recorded_failure_rate`` is the rate the
      runs themselves show (the one the page offers as the default): that rate keeps
      the recorded failure loss as it is.
    """

    price: float | None = None
    utilization_target: float | None = None
    workers: int | None = None
    failure_rate_per_instance_hour: float | None = None
    checkpoint_interval_hours: float | None = None
    resume_hours: float = 0.0
    reschedule_hours: float = 0.0
    recorded_failure_rate: float | None = None

    def __post_init__(self) -> None:
        if self.price is not None and not (math.isfinite(self.price) and self.price >= 0):
            raise PlanningError("what-if price must be >= 0")
        if self.utilization_target is not None and not 0 < self.utilization_target <= 1:
            raise PlanningError("utilization target must be in (0, 1]")
        if self.workers is not None and self.workers < 1:
            raise PlanningError("what-if workers must be >= 1")
        rate = self.failure_rate_per_instance_hour
        if rate is not None and not (math.isfinite(rate) and rate >= 0):
            raise PlanningError("failure rate must be >= 0")
        interval = self.checkpoint_interval_hours
        if interval is not None and not (math.isfinite(interval) and interval > 0):
            raise PlanningError("checkpoint interval must be > 0")
        if self.resume_hours < 0 or self.reschedule_hours < 0:
            raise PlanningError("resume and reschedule hours must be >= 0")

    @property
    def changes_failure_rate(self) -> bool:
        """A failure rate is given and differs from the recorded one."""
        rate = self.failure_rate_per_instance_hour
        if rate is None:
            return False
        recorded = self.recorded_failure_rate
        return recorded is None or not math.isclose(rate, recorded, rel_tol=1e-9, abs_tol=0.0)

    @property
    def is_empty(self) -> bool:
        """True when nothing would change."""
        return (
            self.price is None
            and self.utilization_target is None
            and self.workers is None
            and self.failure_rate_per_instance_hour is None
        )


@dataclass(frozen=True)
class AdjustedRun:
    """A run after the what-ifs: workers, wall clock (h), GPU-hours, price and cost."""

    workers: float
    wall_clock_hours: float
    gpu_hours: float
    price_per_gpu_hour: float
    cost_usd: float


def apply_what_if(
    run: RunFacts, what_if: WhatIf | None, scaling_model: ScalingModel | None
) -> tuple[AdjustedRun, list[str]]:
    """Apply the what-ifs to one run, in this order, and return warnings for skipped ones.

    A what-if *replaces* what the run recorded, never adds to it (methodology.md §5), and a
    what-if equal to today's value changes nothing.

    1. failure rate lambda: the recorded failure loss F = sum(tch + trm + tre) is taken
       out of the wall clock (T0 = T - F, the failure-free run) and the expected loss at
       lambda is put in: T1 = T0 + (T0 / M) * (interval / 2 + resume + reschedule), with
       M = 1 / (Weff * lambda) (each GPU one instance). lambda = 0 gives T0, so fewer
       failures never cost more. G1 = Weff * T1. A rate equal to the window's recorded
       rate (``recorded_failure_rate``) keeps what the run recorded: the model's
       expected loss at that rate is only an estimate of the loss already measured.
    2. workers N, a nominal count like the run's W (needs a scaling model):
       T2 = T1 * C(W) / C(N) (Gunther's USL / Amdahl, methodology.md §6), effective
       workers Weff * N / W, G2 = Weff * N / W * T2. N = W changes nothing, even when
       the run reported G < W * T (16 workers, 13 h, G = 180 stays 180 GPU-h);
    3. utilization target: G and T scale by u_now / u_target (same useful work at a
       higher busy fraction, methodology.md §5); skipped when the run's u is 0;
    4. price replaces the run's price. Cost = G * price.
    """
    warnings: list[str] = []
    n: float = run.effective_workers
    t = run.wall_clock_hours
    g = run.gpu_hours
    price = run.price_per_gpu_hour
    if what_if is None:
        return AdjustedRun(n, t, g, price, g * price), warnings
    if what_if.changes_failure_rate:
        t, g = _failure_rate(run, what_if, t, g, warnings)
    if what_if.workers is not None and what_if.workers != run.workers:
        n, t, g = _workers(run, what_if.workers, scaling_model, (n, t, g), warnings)
    if what_if.utilization_target is not None:
        factor = _utilization_factor(run.gpu_utilization, what_if.utilization_target, warnings)
        g, t = g * factor, t * factor
    if what_if.price is not None:
        price = what_if.price
    return AdjustedRun(n, t, g, price, g * price), warnings


def _failure_rate(
    run: RunFacts, what_if: WhatIf, t: float, g: float, warnings: list[str]
) -> tuple[float, float]:
    """Step 1 of :func:`apply_what_if`: (T1, G1), or (T, G) and a warning without an
    interval."""
    rate = what_if.failure_rate_per_instance_hour
    interval = what_if.checkpoint_interval_hours
    if rate is None:
        return t, g
    if interval is None:
        warnings.append("Failure-rate what-if not applied: give a checkpoint interval.")
        return t, g
    weff = run.effective_workers
    recorded = sum(i.total_hours for i in run.interruptions)
    base = max(t - recorded, 1e-9)
    failures = base * weff * rate  # T0 / M
    per_failure = expected_loss_per_failure(
        interval, what_if.resume_hours, what_if.reschedule_hours
    )
    t = base + failures * per_failure
    return t, weff * t


def _workers(
    run: RunFacts,
    workers: int,
    scaling_model: ScalingModel | None,
    now: tuple[float, float, float],
    warnings: list[str],
) -> tuple[float, float, float]:
    """Step 2: (effective workers, T2, G2) from ``now`` = (n, T1, G1); unchanged, with a
    warning, without a scaling model."""
    if scaling_model is None:
        warnings.append(
            f"Workers what-if ({workers}) not applied: it needs a scaling model "
            "(probe the job at 2+ worker counts)."
        )
        return now
    n = run.effective_workers * workers / run.workers
    t = now[1] * scaling_model.capacity(run.workers) / scaling_model.capacity(workers)
    for count in (run.workers, workers):
        if scaling_model.is_extrapolation(count):
            warnings.append(
                f"{count} workers is outside the probed range "
                f"{scaling_model.min_workers}..{scaling_model.max_workers}: "
                "the scaling model is extrapolating."
            )
    return n, t, n * t


def _utilization_factor(u: float, target: float, warnings: list[str]) -> float:
    """Step 3: u / u_target, by which G and T scale (1, with a warning, when u is 0)."""
    if u <= 0:
        warnings.append("Utilization target not applied to runs with 0% utilization.")
        return 1.0
    factor = u / target
    if factor > 1:
        # Enough digits that the two numbers differ (70% vs 70.4%, not 70% vs 70%).
        digits = next((d for d in (0, 1, 2) if f"{target:.{d}%}" != f"{u:.{d}%}"), 3)
        warnings.append(
            f"Utilization target {target:.{digits}%} is below the observed "
            f"{u:.{digits}%} for some runs: their GPU-hours go up."
        )
    return factor


def like_plan_run(
    plan: RunFacts,
    *,
    gpu_utilization: float,
    workers: int | None = None,
    wall_clock_hours: float | None = None,
    scaling_model: ScalingModel | None = None,
) -> tuple[float, float]:
    """(wall clock h, GPU-hours) of a gate arm's run described against a plan's run.

    With a wall clock, the run is what it says: T as given, G = workers x T. Without
    one it is the plan's job done at the arm's utilization and workers, as the plan's
    what-ifs would price it (methodology.md §5): the same useful work at another busy
    fraction takes T = T_plan x u_plan / u_arm (kept at T_plan when either is 0), at N
    workers T x C(W_plan) / C(N) through the scaling model (no model: T unchanged), and
    G = (G_plan / T_plan) x N / W_plan x T. A candidate at 70% against an 8 x 14 h plan
    at 38% takes 14 x 38/70 = 7.6 h, 60.8 GPU-h: what the plan's 70% utilization
    target projects, not the plan's 112 GPU-h (issue 23).
    """
    n = plan.workers if workers is None else workers
    if wall_clock_hours is not None:
        return wall_clock_hours, n * wall_clock_hours
    t = plan.wall_clock_hours
    if plan.gpu_utilization > 0 and gpu_utilization > 0:
        t = t * plan.gpu_utilization / gpu_utilization
    if n != plan.workers and scaling_model is not None:
        t = t * scaling_model.capacity(plan.workers) / scaling_model.capacity(n)
    return t, plan.effective_workers * n / plan.workers * t
