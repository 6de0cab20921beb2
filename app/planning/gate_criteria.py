"""The A/B gate's three criteria, each a :class:`~app.planning.gate_types.CriterionResult`
(methodology.md §7): utilization uplift by Welch's t, quality non-inferiority by the
group-sequential test, the projected cost on the pipeline's cost basis."""

from __future__ import annotations

from collections.abc import Sequence

from app.planning.budget_status import fits_budget
from app.planning.cost_basis import basis_figure
from app.planning.gate_types import (
    MAX_REALISTIC_RUNS_PER_ARM,
    CriterionResult,
    GateThresholds,
    Status,
    Unit,
)
from app.planning.model import RunFacts
from app.planning.projection import CadenceProjection, Projection, project_costs
from app.planning.scaling import ScalingModel
from app.planning.sequential import SequentialDesign, sequential_decision
from app.planning.series_bill import SeriesContext
from app.planning.welch import WelchComparison, runs_needed_per_arm, welch, welch_bounds
from app.planning.whatif import WhatIf, apply_what_if

COST = "projected_cost"  # the cost criterion's name


def _needed(c: WelchComparison, gap: float, th: GateThresholds) -> int | None:
    return runs_needed_per_arm(c.var_baseline, c.var_candidate, gap, th.alpha, th.power)


def statistical_criterion(
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
    clears = c.diff > threshold if strict_pass else c.diff >= threshold
    if c.df is None:
        return _zero_variance(name, what, c.diff, threshold, clears, unit)
    (lo, hi), p = welch_bounds(c, th.alpha, threshold)
    numbers = (
        f"{what}: difference {c.diff:+.4g} ({1 - th.alpha:.0%} one-sided bounds {lo:.4g} to "
        f"{hi:.4g}, Welch df {c.df:.1f}, p = {p:.3g}) against a threshold of {threshold:+.4g}"
    )
    passes = lo > threshold if strict_pass else lo >= threshold
    status: Status = "pass" if passes else ("fail" if hi < threshold else "undecided")
    needed: int | None = None
    cannot = False
    if status == "undecided":
        reason, needed, cannot = _undecided(c, numbers, threshold, clears, n_min, th)
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


def _zero_variance(
    name: str, what: str, diff: float, threshold: float, clears: bool, unit: Unit
) -> CriterionResult:
    """Every run in both arms has the same value: undecided, or cannot pass when the
    difference is on the failing side."""
    if clears:
        reason = (
            f"{what}: every run in both arms has the same value (difference "
            f"{diff:.4g}); with zero variance the test cannot say how reliable that is."
        )
        return CriterionResult(name, diff, threshold, None, "undecided", reason, None, unit=unit)
    reason = (
        f"{what}: every run in both arms has the same value, difference {diff:.4g} "
        f"against a threshold of {threshold:+.4g}: cannot pass with more runs like these."
    )
    return CriterionResult(
        name, diff, threshold, None, "undecided", reason, None, unit=unit, cannot_pass=True
    )


def _undecided(
    c: WelchComparison, numbers: str, threshold: float, clears: bool, n_min: int, th: GateThresholds
) -> tuple[str, int | None, bool]:
    """(reason, runs still needed per arm at ``th.power``, cannot pass) of an undecided
    test: cannot pass when the estimate is on the failing side or more than
    MAX_REALISTIC_RUNS_PER_ARM would be needed."""
    power = f"{th.power:.0%} power"
    if not clears:
        return (
            f"{numbers}; the estimate is on the failing side of the threshold, so more runs "
            "would confirm a fail rather than pass: cannot pass.",
            None,
            True,
        )
    n_req = _needed(c, c.diff - threshold, th)
    if n_req is None or n_req - n_min > MAX_REALISTIC_RUNS_PER_ARM:
        return (
            f"{numbers}; more than {MAX_REALISTIC_RUNS_PER_ARM} more runs per arm would be "
            f"needed for {power}: cannot pass in practice.",
            None,
            True,
        )
    needed = max(1, n_req - n_min, th.min_runs - n_min)
    return f"{numbers}; about {needed} more runs per arm would decide it ({power}).", needed, False


def sequential_quality(
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


def cost_criterion(
    candidate: Sequence[RunFacts],
    target_runs_per_week: float,
    budget_usd: float,
    convention: str,
    th: GateThresholds,
    what_if: WhatIf | None,
    scaling_model: ScalingModel | None,
    series: SeriesContext | None = None,
) -> tuple[CriterionResult, Projection | None]:
    """The projection of the candidate at the target cadence (the same function, runs,
    what-ifs and seed as the cost card), compared on ``th.cost_basis`` with the budget."""
    if not candidate:
        return _no_candidate(budget_usd, th), None
    proj = project_costs(
        candidate,
        [target_runs_per_week],
        convention=convention,
        budget_usd=budget_usd,
        what_if=what_if,
        scaling_model=scaling_model,
        series=series,
    )
    cp = proj.cadences[0]
    value = basis_figure(th.cost_basis, cp.expected_bill_usd, cp.bill_p90_usd)
    p_over = cp.p_over_budget if cp.p_over_budget is not None else 0.0
    # The one test of every budget word, never the figure alone (budget_status.py).
    status: Status = "pass" if fits_budget(p_over, th.risk_tolerance) else "fail"
    reason = _cost_reason(target_runs_per_week, cp, budget_usd, p_over, th, status)
    interval = (cp.bill_p10_usd, cp.bill_p90_usd)
    return CriterionResult(
        COST,
        value,
        budget_usd,
        interval,
        status,
        reason,
        None,
        unit="usd_per_month",
        basis=th.cost_basis,
        p_over_budget=p_over,
    ), proj


def _no_candidate(budget_usd: float, th: GateThresholds) -> CriterionResult:
    """Undecided: no candidate run to project the monthly cost from."""
    reason = "No candidate runs to project the monthly cost from."
    return CriterionResult(
        COST,
        None,
        budget_usd,
        None,
        "undecided",
        reason,
        th.min_runs,
        unit="usd_per_month",
        basis=th.cost_basis,
    )


def _cost_reason(
    runs_per_week: float,
    cp: CadenceProjection,
    budget_usd: float,
    p_over: float,
    th: GateThresholds,
    status: Status,
) -> str:
    """The cost criterion in one sentence: the cadence, the mean run, the bill, the
    chance over the budget against the risk tolerance, and the status."""
    return (
        f"At {runs_per_week:g} runs/week ({cp.runs_in_month:.3g}/month) the candidate's "
        f"mean ${cp.mean_cost_per_run_usd:,.0f}/run gives an expected bill of "
        f"${cp.expected_bill_usd:,.0f}/month, p90 bill ${cp.bill_p90_usd:,.0f}; against a "
        f"budget of ${budget_usd:,.0f} a {p_over:.0%} chance over, the risk tolerance "
        f"{th.risk_tolerance:.0%}: {status}."
    )


def quality_missing(
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


def median_cost(runs: Sequence[RunFacts], what_if: WhatIf | None) -> float:
    costs = sorted(apply_what_if(r, what_if, None)[0].cost_usd for r in runs)
    mid = len(costs) // 2  # costs[~mid] is costs[mid] for odd counts, costs[mid - 1] for even
    return (costs[mid] + costs[~mid]) / 2 if costs else 0.0
