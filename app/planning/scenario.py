"""One scenario and one run window for every figure of a pipeline (methodology.md §5, §13).

A scenario is what a reader asks "what if?" about: the cadence, the price, a utilization
target, a worker count, a failure rate, a checkpoint interval, the month convention and
the budget. It is parsed once per request and every figure of a page or endpoint (cost
cards, gate, levers, checkpoints, alerts, /metrics, overview, review) is computed from
the same object, so two places that show the same quantity show the same number.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from app.planning.model import PlanningError
from app.planning.projection import CALENDAR, weeks_per_month
from app.planning.whatif import WhatIf

RUN_WINDOW = 20
"""Newest runs per variant that feed projections, the gate, levers and checkpoints alike.

Before, projections read 12 runs and the gate 30, so the gate priced a different sample
than the cost card beside it. 20 keeps the bootstrap band meaningful and still follows a
change of the job within a few weeks at twice-weekly cadence.
"""


@dataclass(frozen=True)
class Scenario:
    """What-if inputs shared by every figure. None means "as recorded / the pipeline's".

    - ``cadence``: target runs per week (default: twice the pipeline's current cadence).
    - ``price``: USD per GPU-hour for every dollar figure (default: each run's own price,
      else the pipeline's current price).
    - ``utilization_target``, ``workers``, ``failure_rate``, ``checkpoint_interval_hours``:
      what-ifs that *replace* what the runs recorded (methodology.md §5).
    - ``convention``: "calendar" (52/12 weeks a month) or "four_week".
    - ``budget``: USD per month (default: the pipeline's budget).
    """

    cadence: float | None = None
    price: float | None = None
    utilization_target: float | None = None
    workers: int | None = None
    failure_rate: float | None = None
    checkpoint_interval_hours: float | None = None
    convention: str = CALENDAR
    budget: float | None = None

    def __post_init__(self) -> None:
        weeks_per_month(self.convention)  # raises PlanningError for an unknown convention
        if self.cadence is not None and not (math.isfinite(self.cadence) and self.cadence > 0):
            raise PlanningError("cadence must be > 0 runs per week")
        if self.budget is not None and not (math.isfinite(self.budget) and self.budget >= 0):
            raise PlanningError("budget must be >= 0")
        self.what_if()  # validates price, utilization target, workers, rate, interval

    def target(self, current_runs_per_week: float) -> float:
        """The cadence every figure is computed at: the given one, else 2 x today's."""
        return self.cadence if self.cadence is not None else 2.0 * current_runs_per_week

    def budget_or(self, pipeline_budget: float | None) -> float | None:
        return self.budget if self.budget is not None else pipeline_budget

    def what_if(
        self,
        *,
        default_interval_hours: float | None = None,
        resume_hours: float = 0.0,
        recorded_failure_rate: float | None = None,
    ) -> WhatIf:
        """The run-level what-ifs (price, utilization, workers, failure rate); a failure
        rate equal to ``recorded_failure_rate`` keeps the recorded failure loss."""
        return WhatIf(
            price=self.price,
            utilization_target=self.utilization_target,
            workers=self.workers,
            failure_rate_per_instance_hour=self.failure_rate,
            checkpoint_interval_hours=self.checkpoint_interval_hours or default_interval_hours,
            resume_hours=resume_hours,
            recorded_failure_rate=recorded_failure_rate,
        )


@dataclass(frozen=True)
class RunWindow:
    """The runs of one variant a figure used: how many, and the first and last start."""

    variant: str
    runs: int
    first_started_at: datetime | None
    last_started_at: datetime | None
    limit: int = RUN_WINDOW

    @property
    def label(self) -> str:
        """ "12 newest baseline runs, 2026-10-01 to 2026-11-28" (for pages and working)."""
        if not self.runs or self.first_started_at is None or self.last_started_at is None:
            return f"no {self.variant} runs"
        first = self.first_started_at.date().isoformat()
        last = self.last_started_at.date().isoformat()
        return f"{self.runs} newest {self.variant} runs, {first} to {last}"


def window_of(variant: str, started: Sequence[datetime], limit: int = RUN_WINDOW) -> RunWindow:
    """The :class:`RunWindow` of runs started at ``started`` (any order)."""
    if not started:
        return RunWindow(variant, 0, None, None, limit)
    return RunWindow(variant, len(started), min(started), max(started), limit)
