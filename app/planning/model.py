"""Plain inputs shared by every planning module: one finished run and its interruptions.

Units: durations in wall-clock hours, GPU time in GPU-hours, money in USD, utilization
and MFU as fractions in [0, 1]. Nothing here touches a database or a web framework.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


class PlanningError(ValueError):
    """Input the planning arithmetic cannot use (negative hours, utilization above 1, ...).

    A ``ValueError`` subclass so callers can map it to a 422 response.
    """


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise PlanningError(message)


# The messages are formatted only on failure: every run read for a page is checked.
def _finite_non_negative(value: float, name: str) -> None:
    if not (math.isfinite(value) and value >= 0.0):
        raise PlanningError(f"{name} must be finite and >= 0, got {value}")


def _fraction(value: float, name: str) -> None:
    if not (math.isfinite(value) and 0.0 <= value <= 1.0):
        raise PlanningError(f"{name} must be in [0, 1], got {value}")


@dataclass(frozen=True)
class Interruption:
    """One failure during a run (methodology.md §3).

    ``lost_progress_hours`` (tch) is the time since the last checkpoint when it failed,
    ``resume_hours`` (trm) the time to resume once resources are back, and
    ``reschedule_hours`` (tre) the time waiting for replacement resources.
    Every planning formula uses only the per-run *sums* of these three fields, so a
    single aggregated ``Interruption`` gives the same numbers as the individual ones.
    """

    lost_progress_hours: float
    resume_hours: float
    reschedule_hours: float

    def __post_init__(self) -> None:
        _finite_non_negative(self.lost_progress_hours, "lost_progress_hours")
        _finite_non_negative(self.resume_hours, "resume_hours")
        _finite_non_negative(self.reschedule_hours, "reschedule_hours")

    @property
    def total_hours(self) -> float:
        """Wall-clock hours this failure cost: tch + trm + tre."""
        return self.lost_progress_hours + self.resume_hours + self.reschedule_hours


@dataclass(frozen=True)
class RunFacts:
    """What one finished training run cost and how it spent its time (methodology.md §2).

    ``gpu_hours`` (G) is what was billed; usually ``workers * wall_clock_hours`` but it may
    be less when the worker count changed mid-run. Wall-clock durations (stalls,
    checkpoints, interruptions) are turned into GPU-hours with the *effective* worker
    count ``G / T`` (see :func:`effective_workers`), which equals ``workers`` when
    G = W * T. Raises :class:`PlanningError` for impossible values (T or G not positive,
    fractions outside [0, 1], negative durations).
    """

    workers: int
    wall_clock_hours: float
    gpu_hours: float
    gpu_utilization: float
    price_per_gpu_hour: float
    data_stall_hours: float = 0.0
    checkpoint_hours: float = 0.0
    scheduling_wait_hours: float = 0.0
    mfu: float | None = None
    interruptions: tuple[Interruption, ...] = ()
    quality_value: float | None = None
    # The other attempts of this run's scheduled retraining that did not succeed (same
    # retraining_id), paid in full: the bill draws retraining costs, not attempt costs.
    failed_attempts_gpu_hours: float = 0.0
    failed_attempts_cost_usd: float = 0.0
    # Progress (wall-clock hours) this attempt resumed from those attempts' checkpoints.
    resumed_from_hours: float = 0.0

    def __post_init__(self) -> None:
        _require(self.workers >= 1, f"workers must be >= 1, got {self.workers}")
        _require(
            math.isfinite(self.wall_clock_hours) and self.wall_clock_hours > 0.0,
            f"wall_clock_hours must be > 0, got {self.wall_clock_hours}",
        )
        _require(
            math.isfinite(self.gpu_hours) and self.gpu_hours > 0.0,
            f"gpu_hours must be > 0, got {self.gpu_hours}",
        )
        _fraction(self.gpu_utilization, "gpu_utilization")
        _finite_non_negative(self.price_per_gpu_hour, "price_per_gpu_hour")
        _finite_non_negative(self.data_stall_hours, "data_stall_hours")
        _finite_non_negative(self.checkpoint_hours, "checkpoint_hours")
        _finite_non_negative(self.scheduling_wait_hours, "scheduling_wait_hours")
        if self.mfu is not None:
            _fraction(self.mfu, "mfu")
        if self.quality_value is not None:
            _require(math.isfinite(self.quality_value), "quality_value must be finite")
        _finite_non_negative(self.failed_attempts_gpu_hours, "failed_attempts_gpu_hours")
        _finite_non_negative(self.failed_attempts_cost_usd, "failed_attempts_cost_usd")
        _finite_non_negative(self.resumed_from_hours, "resumed_from_hours")

    @property
    def effective_workers(self) -> float:
        """Weff = G / T: the worker count that converts wall-clock hours into GPU-hours."""
        return effective_workers(self)

    @property
    def lost_progress_hours(self) -> float:
        """Sum of tch over the run's interruptions."""
        return sum(i.lost_progress_hours for i in self.interruptions)

    @property
    def resume_hours(self) -> float:
        """Sum of trm over the run's interruptions."""
        return sum(i.resume_hours for i in self.interruptions)

    @property
    def reschedule_hours(self) -> float:
        """Sum of tre over the run's interruptions."""
        return sum(i.reschedule_hours for i in self.interruptions)

    @property
    def cost_usd(self) -> float:
        """G * price (methodology.md §2)."""
        return self.gpu_hours * self.price_per_gpu_hour

    @property
    def failed_badput_gpu_hours(self) -> float:
        """Failed attempts' GPU-hours less the progress this attempt resumed from them
        (resumed_from_hours x Weff), never negative (methodology.md §2). Example: 120 failed
        GPU-h, 14 h resumed at 8 workers: 120 - 112 = 8 GPU-h."""
        resumed = self.resumed_from_hours * self.effective_workers
        return max(self.failed_attempts_gpu_hours - resumed, 0.0)

    @property
    def retraining_cost_usd(self) -> float:
        """This attempt's cost plus its retraining's failed attempts' (methodology.md §5.1)."""
        return self.cost_usd + self.failed_attempts_cost_usd


def effective_workers(run: RunFacts) -> float:
    """Weff = G / T, the GPU-hours billed per wall-clock hour.

    Equals ``workers`` when G = W * T; smaller when workers were removed mid-run. Every
    wall-clock duration d of a run is worth ``d * Weff`` GPU-hours.
    """
    return run.gpu_hours / run.wall_clock_hours
