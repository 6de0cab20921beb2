"""The A/B gate's types: its thresholds, one criterion's result and the verdict
(methodology.md §7). The criteria are in :mod:`app.planning.gate_criteria`, the verdict
in :mod:`app.planning.gate`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from app.planning.budget_status import DEFAULT_RISK_TOLERANCE
from app.planning.cost_basis import COST_BASES, CostBasis
from app.planning.model import PlanningError
from app.planning.projection import Projection
from app.planning.sequential import DEFAULT_MAX_RUNS
from app.planning.welch import ALPHA_MIN

Status = Literal["pass", "fail", "undecided"]
Verdict = Literal["PASS", "FAIL", "INSUFFICIENT_DATA"]
Unit = Literal["usd_per_month", "points", "metric"]

MAX_REALISTIC_RUNS_PER_ARM = 100
"""More runs per arm than this (two years at weekly cadence) is not a plan: "cannot pass"."""


@dataclass(frozen=True)
class GateThresholds:
    """Fixed in advance: uplift in utilization points, quality margin in metric units."""

    min_utilization_uplift_points: float = 10.0
    quality_margin: float = 0.01
    alpha: float = 0.05
    min_runs: int = 3
    power: float = 0.8
    cost_basis: CostBasis = "p90"  # the figure the cost criterion shows, never its test
    # The cost criterion's test (app/planning/budget_status.py, fits_budget): P(bill >
    # budget) below this tolerance, the CADENCE_RISK_TOLERANCE of every budget word.
    risk_tolerance: float = DEFAULT_RISK_TOLERANCE
    # The quality criterion's sequential design: looks after every run up to this many
    # runs per arm keep its false-pass rate at alpha (app/planning/sequential.py).
    max_runs: int = DEFAULT_MAX_RUNS

    def __post_init__(self) -> None:
        if not ALPHA_MIN <= self.alpha < 0.5:
            raise PlanningError(f"alpha must be in [{ALPHA_MIN:g}, 0.5)")
        if not 0.5 <= self.power < 1:
            raise PlanningError("power must be in [0.5, 1)")
        if self.cost_basis not in COST_BASES:
            raise PlanningError("cost basis must be 'expected_bill' or 'p90'")
        if self.quality_margin < 0 or self.min_runs < 2:
            raise PlanningError("quality margin must be >= 0 and min_runs >= 2")


@dataclass(frozen=True)
class CriterionResult:
    """One gate criterion. ``interval`` = (one-sided lower, upper) (1 - alpha) bounds.

    ``unit`` says what value and threshold are in. ``cannot_pass`` is True when no
    realistic number of runs could make it pass (the estimate sits on the failing side
    of the threshold, or more than :data:`MAX_REALISTIC_RUNS_PER_ARM` would be needed).
    """

    name: str
    value: float | None
    threshold: float | None
    interval: tuple[float, float] | None
    status: Status
    reason: str
    runs_needed_per_arm: int | None
    p_value: float | None = None
    unit: Unit = "points"
    cannot_pass: bool = False
    basis: str | None = None
    p_over_budget: float | None = None  # the cost criterion's P(bill > budget)


@dataclass(frozen=True)
class GateResult:
    """Verdict with every criterion's numbers; ``runs_needed_per_arm``: the most extra runs
    per arm an undecided criterion asks for at ``power`` (None if none can say), also in
    weeks at the current cadence and in dollars (a baseline and a candidate run each)."""

    verdict: Verdict
    criteria: tuple[CriterionResult, ...]
    summary: str
    baseline_runs: int
    candidate_runs: int
    runs_needed_per_arm: int | None
    projection: Projection | None
    power: float = 0.8
    runs_needed_weeks: float | None = None
    runs_needed_usd: float | None = None
