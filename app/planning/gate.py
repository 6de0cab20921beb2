"""The A/B gate: may the pipeline move to the faster cadence? (methodology.md §7)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from app.planning.cost_basis import BASIS_NAMES, COST_BASES, CostBasis, basis_figure
from app.planning.model import PlanningError, RunFacts
from app.planning.projection import CALENDAR, Projection, project_costs
from app.planning.scaling import ScalingModel
from app.planning.sequential import DEFAULT_MAX_RUNS, SequentialDesign, sequential_decision
from app.planning.welch import ALPHA_MIN, runs_needed_per_arm, welch, welch_bounds
from app.planning.whatif import WhatIf, apply_what_if

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
    cost_basis: CostBasis = "p90"
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


def _needed(c: object, gap: float, th: GateThresholds) -> int | None:
    from app.planning.welch import WelchComparison

    assert isinstance(c, WelchComparison)
    return runs_needed_per_arm(c.var_baseline, c.var_candidate, gap, th.alpha, th.power)


def _statistical(
    name: str,
    what: str,
    baseline: list[float],
    candidate: list[float],
    threshold: float,
    th: GateThresholds,
    *,
    strict_pass: bool,
    unit: Unit,
) -> CriterionResult:
    """Shared Welch decision: pass if lower bound >= threshold (> if strict), fail if upper
    bound < threshold, else undecided; too few runs or zero variance -> undecided.

    Runs still needed are for ``th.power`` (80% by default). When the estimate sits on
    the failing side of the threshold, or more than MAX_REALISTIC_RUNS_PER_ARM would be
    needed, the criterion ``cannot_pass``: more runs would only confirm it."""
    nb, nc = len(baseline), len(candidate)
    n_min = min(nb, nc)
    if n_min < 2:
        value = (sum(candidate) / nc - sum(baseline) / nb) if n_min else None
        reason = (
            f"{what}: {nb} baseline and {nc} candidate values; at least {th.min_runs} per arm "
            "are needed."
        )
        return CriterionResult(
            name, value, threshold, None, "undecided", reason, th.min_runs - n_min, unit=unit
        )
    c = welch(baseline, candidate)
    conf = f"{1 - th.alpha:.0%}"
    clears = c.diff > threshold if strict_pass else c.diff >= threshold
    if c.df is None:
        if clears:
            reason = (
                f"{what}: every run in both arms has the same value (difference "
                f"{c.diff:.4g}); with zero variance the test cannot say how reliable that is."
            )
            return CriterionResult(
                name, c.diff, threshold, None, "undecided", reason, None, unit=unit
            )
        reason = (
            f"{what}: every run in both arms has the same value, difference {c.diff:.4g} "
            f"against a threshold of {threshold:+.4g}: cannot pass with more runs like these."
        )
        return CriterionResult(
            name, c.diff, threshold, None, "undecided", reason, None, unit=unit, cannot_pass=True
        )
    (lo, hi), p = welch_bounds(c, th.alpha, threshold)
    numbers = (
        f"{what}: difference {c.diff:+.4g} ({conf} one-sided bounds {lo:.4g} to {hi:.4g}, "
        f"Welch df {c.df:.1f}, p = {p:.3g}) against a threshold of {threshold:+.4g}"
    )
    passes = lo > threshold if strict_pass else lo >= threshold
    status: Status = "pass" if passes else ("fail" if hi < threshold else "undecided")
    needed: int | None = None
    cannot = False
    power = f"{th.power:.0%} power"
    if status == "undecided" and not clears:
        cannot = True
        reason = (
            f"{numbers}; the estimate is on the failing side of the threshold, so more runs "
            "would confirm a fail rather than pass: cannot pass."
        )
    elif status == "undecided":
        n_req = _needed(c, c.diff - threshold, th)
        if n_req is None or n_req - n_min > MAX_REALISTIC_RUNS_PER_ARM:
            cannot = True
            reason = (
                f"{numbers}; more than {MAX_REALISTIC_RUNS_PER_ARM} more runs per arm would be "
                f"needed for {power}: cannot pass in practice."
            )
        else:
            needed = max(1, n_req - n_min, th.min_runs - n_min)
            reason = f"{numbers}; about {needed} more runs per arm would decide it ({power})."
    else:
        reason = f"{numbers}: {status}."
    if n_min < th.min_runs and not cannot:
        provisional = f"provisionally {status}, but " if status != "undecided" else ""
        reason = (
            f"{numbers}; {provisional}one arm has only {n_min} values (< {th.min_runs}), "
            "so not decided."
        )
        needed = max(needed or 0, th.min_runs - n_min)
        status = "undecided"
    return CriterionResult(
        name, c.diff, threshold, (lo, hi), status, reason, needed, p, unit, cannot
    )


def _sequential_quality(
    what: str, baseline: list[float], candidate: list[float], th: GateThresholds
) -> CriterionResult:
    """Quality non-inferiority as an always-valid, group-sequential test."""
    n0 = max(th.min_runs, 2)
    design = SequentialDesign(th.alpha, n0, max(th.max_runs, n0), th.power)
    d = sequential_decision(baseline, candidate, -th.quality_margin, design, what)
    return CriterionResult(
        "quality_non_inferiority",
        d.value,
        -th.quality_margin,
        d.interval,
        d.status,
        d.reason,
        d.runs_needed_per_arm,
        d.p_value,
        unit="metric",
    )


def _cost(
    candidate: Sequence[RunFacts],
    target_runs_per_week: float,
    budget_usd: float,
    convention: str,
    th: GateThresholds,
    what_if: WhatIf | None,
    scaling_model: ScalingModel | None,
) -> tuple[CriterionResult, Projection | None]:
    """The projection of the candidate at the target cadence (the same function, runs,
    what-ifs and seed as the cost card), compared on ``th.cost_basis`` with the budget."""
    name = "projected_cost"
    if not candidate:
        reason = "No candidate runs to project the monthly cost from."
        return CriterionResult(
            name,
            None,
            budget_usd,
            None,
            "undecided",
            reason,
            th.min_runs,
            unit="usd_per_month",
            basis=th.cost_basis,
        ), None
    proj = project_costs(
        candidate,
        [target_runs_per_week],
        convention=convention,
        budget_usd=budget_usd,
        what_if=what_if,
        scaling_model=scaling_model,
    )
    cp = proj.cadences[0]
    value = basis_figure(th.cost_basis, cp.expected_bill_usd, cp.bill_p90_usd)
    status: Status = "pass" if value <= budget_usd else "fail"
    p_over = cp.p_over_budget if cp.p_over_budget is not None else 0.0
    reason = (
        f"At {target_runs_per_week:g} runs/week ({cp.runs_in_month:.3g}/month) the candidate's "
        f"mean ${cp.mean_cost_per_run_usd:,.0f}/run gives an expected bill of "
        f"${cp.expected_bill_usd:,.0f}/month (p90 ${cp.bill_p90_usd:,.0f}, P(over budget) "
        f"{p_over:.0%}); the {BASIS_NAMES[th.cost_basis]} ${value:,.0f} against a budget of "
        f"${budget_usd:,.0f}: {status}."
    )
    interval = (cp.bill_p10_usd, cp.bill_p90_usd)
    return CriterionResult(
        name,
        value,
        budget_usd,
        interval,
        status,
        reason,
        None,
        unit="usd_per_month",
        basis=th.cost_basis,
    ), proj


def _quality_missing(
    baseline: Sequence[RunFacts], candidate: Sequence[RunFacts], metric_note: str
) -> CriterionResult | None:
    """Runs exist but an arm reports no quality_value at all: say so, don't ask for runs."""
    missing = [
        arm
        for arm, runs in (("baseline", baseline), ("candidate", candidate))
        if runs and all(r.quality_value is None for r in runs)
    ]
    if not missing:
        return None
    reason = (
        f"{metric_note}: the {' and '.join(missing)} runs report no quality_value; send "
        "quality_value with each run (more runs without it cannot decide this)."
    )
    return CriterionResult(
        "quality_non_inferiority", None, None, None, "undecided", reason, None, unit="metric"
    )


def _median_cost(runs: Sequence[RunFacts], what_if: WhatIf | None) -> float:
    costs = sorted(apply_what_if(r, what_if, None)[0].cost_usd for r in runs)
    mid = len(costs) // 2  # costs[~mid] is costs[mid] for odd counts, costs[mid - 1] for even
    return (costs[mid] + costs[~mid]) / 2 if costs else 0.0


def evaluate_gate(
    baseline: Sequence[RunFacts],
    candidate: Sequence[RunFacts],
    *,
    higher_is_better: bool = True,
    target_runs_per_week: float,
    budget_usd: float,
    convention: str = CALENDAR,
    thresholds: GateThresholds | None = None,
    what_if: WhatIf | None = None,
    scaling_model: ScalingModel | None = None,
    current_runs_per_week: float | None = None,
) -> GateResult:
    """Decide whether the candidate may run at the target cadence (methodology.md §7).

    1. utilization_uplift, in percentage points (100 x utilization): Welch's t (1947) on
       candidate - baseline; pass if the one-sided (1 - alpha) lower bound >= the
       threshold, fail if the upper bound < it, else undecided.
    2. quality_non_inferiority: d = s (mean_c - mean_b), s = +1 if higher is better else
       -1; one-sided test of H0: d <= -margin, group-sequential so that checking after
       every run keeps the false-pass rate at alpha (app/planning/sequential.py): pass if
       the look's lower bound > -margin, fail if its upper bound < -margin, else
       undecided. Runs without a quality value are left out of this criterion; an arm
       with none at all is reported as such.
    3. projected_cost: the candidate's month's bill at the target cadence under the
       same what-ifs as the cost card (:func:`project_costs`), its ``cost_basis`` figure
       (the bill's p90 by default, or the expected bill) <= budget.

    Verdict: INSUFFICIENT_DATA if either arm has fewer than ``min_runs`` runs; otherwise
    FAIL if any criterion fails or cannot pass, INSUFFICIENT_DATA if any is undecided
    (including zero variance in both arms), PASS only when all pass. Runs still needed
    are for ``power`` (see :func:`app.planning.welch.runs_needed_per_arm`), also given
    in weeks at ``current_runs_per_week`` and in dollars (median baseline + candidate
    cost per run, under the what-ifs, per extra pair of runs).
    """
    th = thresholds or GateThresholds()
    if budget_usd < 0 or target_runs_per_week < 0:
        raise PlanningError("budget and target cadence must be >= 0")
    util = _statistical(
        "utilization_uplift",
        "Utilization uplift (points)",
        [100.0 * r.gpu_utilization for r in baseline],
        [100.0 * r.gpu_utilization for r in candidate],
        th.min_utilization_uplift_points,
        th,
        strict_pass=False,
        unit="points",
    )
    sign = 1.0 if higher_is_better else -1.0
    direction = "higher" if higher_is_better else "lower"
    what = f"Quality ({direction} is better, sign-adjusted, margin {th.quality_margin:g})"
    quality = _quality_missing(baseline, candidate, what) or _sequential_quality(
        what,
        [sign * r.quality_value for r in baseline if r.quality_value is not None],
        [sign * r.quality_value for r in candidate if r.quality_value is not None],
        th,
    )
    cost, proj = _cost(
        candidate, target_runs_per_week, budget_usd, convention, th, what_if, scaling_model
    )
    criteria = (util, quality, cost)
    nb, nc = len(baseline), len(candidate)
    statuses = {c.status for c in criteria}
    failed = [c.name for c in criteria if c.status == "fail"]
    cannot = [c.name for c in criteria if c.cannot_pass]
    open_ = [c.name for c in criteria if c.status == "undecided" and not c.cannot_pass]
    verdict: Verdict
    if min(nb, nc) < th.min_runs:
        verdict = "INSUFFICIENT_DATA"
        summary = (
            f"{nb} baseline and {nc} candidate runs: at least {th.min_runs} per arm are "
            "needed before the gate can pass."
        )
        if failed:
            summary += f" Already failing: {', '.join(failed)}."
        if cannot:
            summary += f" Cannot pass: {', '.join(cannot)}."
    elif failed or cannot:
        parts = [f"Failed: {', '.join(failed)}."] if failed else []
        parts += [f"Cannot pass: {', '.join(cannot)}."] if cannot else []
        verdict, summary = "FAIL", " ".join(parts)
    elif "undecided" in statuses:
        verdict, summary = "INSUFFICIENT_DATA", f"Not yet decided: {', '.join(open_)}."
    else:
        verdict, summary = "PASS", "All three criteria pass."
    needed = [c.runs_needed_per_arm for c in criteria if c.runs_needed_per_arm is not None]
    most = max(needed) if needed else None
    weeks = usd = None
    if most is not None:
        if current_runs_per_week and most / current_runs_per_week < float("inf"):
            weeks = most / current_runs_per_week  # a denormal cadence: inf, "inf weeks"
        usd = most * (_median_cost(baseline, what_if) + _median_cost(candidate, what_if))
        summary += f" About {most} more runs per arm ({th.power:.0%} power)"
        if weeks is not None:
            summary += f", {weeks:.1f} weeks at {current_runs_per_week:g} runs/week"
        summary += f", ${usd:,.0f}."
    return GateResult(
        verdict=verdict,
        criteria=criteria,
        summary=summary,
        baseline_runs=nb,
        candidate_runs=nc,
        runs_needed_per_arm=most,
        projection=proj,
        power=th.power,
        runs_needed_weeks=weeks,
        runs_needed_usd=usd,
    )
