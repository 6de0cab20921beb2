"""What a run cost and where its idle GPU time went (methodology.md §2)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Literal

from app.planning.model import PlanningError, RunFacts

Unit = Literal["gpu_hours", "usd"]


@dataclass(frozen=True)
class Badput:
    """A run's GPU time split into productive time and named causes of idleness.

    ``productive + idle`` is the run's G; ``data_stall + checkpoint + failure + other_idle``
    equals ``idle`` (up to float rounding). ``unit`` says whether the amounts are
    GPU-hours (from :func:`badput`) or USD (from :meth:`usd`). ``overexplained`` is True
    when the named causes added up to more than the idle time and were scaled down.
    """

    productive: float
    idle: float
    data_stall: float
    checkpoint: float
    failure: float
    other_idle: float
    overexplained: bool = False
    unit: Unit = "gpu_hours"

    @property
    def named(self) -> float:
        """data_stall + checkpoint + failure."""
        return self.data_stall + self.checkpoint + self.failure

    @property
    def total(self) -> float:
        """productive + idle (the run's G, or its cost in USD)."""
        return self.productive + self.idle

    def usd(self, price: float) -> Badput:
        """The same breakdown in USD: every GPU-hour amount times ``price``."""
        return badput_usd(self, price)


def badput(run: RunFacts) -> Badput:
    """Split a run's GPU-hours into productive time and causes of idleness (methodology.md §2).

    With G the billed GPU-hours, u the utilization and Weff = G / T the effective workers:

    - productive = u * G; idle = (1 - u) * G
    - data_stall = data_stall_hours * Weff
    - checkpoint = checkpoint_hours * Weff (blocking writes)
    - failure = sum(lost_progress + resume + reschedule over interruptions) * Weff
    - other_idle = idle - (data_stall + checkpoint + failure)

    If the named causes exceed the idle time (the measurements overlap), they are each
    multiplied by idle / named so they sum exactly to idle, other_idle is 0 and
    ``overexplained`` is set. other_idle is therefore never negative.
    """
    weff = run.effective_workers
    productive = run.gpu_utilization * run.gpu_hours
    idle = (1.0 - run.gpu_utilization) * run.gpu_hours
    data_stall = run.data_stall_hours * weff
    checkpoint = run.checkpoint_hours * weff
    failure = sum(i.total_hours for i in run.interruptions) * weff
    named = data_stall + checkpoint + failure
    if named <= idle:
        return Badput(productive, idle, data_stall, checkpoint, failure, idle - named)
    factor = idle / named
    return Badput(
        productive=productive,
        idle=idle,
        data_stall=data_stall * factor,
        checkpoint=checkpoint * factor,
        failure=failure * factor,
        other_idle=0.0,
        overexplained=True,
    )


def badput_usd(b: Badput, price: float) -> Badput:
    """Convert a GPU-hour breakdown to USD: each field times ``price`` (USD per GPU-hour)."""
    if b.unit != "gpu_hours":
        raise PlanningError("breakdown is already in USD")
    if price < 0:
        raise PlanningError("price must be >= 0")
    return replace(
        b,
        productive=b.productive * price,
        idle=b.idle * price,
        data_stall=b.data_stall * price,
        checkpoint=b.checkpoint * price,
        failure=b.failure * price,
        other_idle=b.other_idle * price,
        unit="usd",
    )
