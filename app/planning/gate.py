"""The A/B gate: may the pipeline move to the faster cadence? (DOMAIN.md §7)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from app.planning.model import PlanningError, RunFacts
from app.planning.projection import Projection, project_costs
from app.planning.sequential import DEFAULT_MAX_RUNS, SequentialDesign, sequential_decision
from app.planning.welch import one_sided_bounds, p_value_above, runs_needed_per_arm, welch

Status = Literal["pass", "fail", "undecided"]
Verdict = Literal["PASS", "FAIL", "INSUFFICIENT_DATA"]


@dataclass(frozen=True)
class GateThresholds:
    """Fixed in advance: uplift in utilization points, quality margin in metric units."""

    min_utilization_uplift_points: float = 10.0
    quality_margin: float = 0.01
    alpha: float = 0.05
    min_runs: int = 3
    # The quality criterion's sequential design: looks after every run up to this many
    # runs per arm keep its false-pass rate at alpha (app/planning/sequential.py).
    max_runs: int = DEFAULT_MAX_RUNS

    def __post_init__(self) -> None:
        if not 0 < self.alpha < 0.5:
            raise PlanningError("alpha must be in (0, 0.5)")
        if self.quality_margin < 0 or self.min_runs < 2:
            raise PlanningError("quality margin must be >= 0 and min_runs >= 2")


@dataclass(frozen=True)
class CriterionResult:
    """One gate criterion. ``interval`` = (one-sided lower, upper) (1 - alpha) bounds."""

    name: str
    value: float | None
    threshold: float | None
    interval: tuple[float, float] | None
    status: Status
    reason: str
    runs_needed_per_arm: int | None
    p_value: float | None = None


@dataclass(frozen=True)
class GateResult:
    """Verdict with every criterion's numbers; ``runs_needed_per_arm`` = the largest
    number of extra runs per arm any undecided criterion asks for (None if none can say).
    """

    verdict: Verdict
    criteria: tuple[CriterionResult, ...]
    summary: str
    baseline_runs: int
    candidate_runs: int
    runs_needed_per_arm: int | None
    projection: Projection | None


def _statistical(
    name: str,
    what: str,
    baseline: list[float],
    candidate: list[float],
    threshold: float,
    th: GateThresholds,
    *,
    strict_pass: bool,
) -> CriterionResult:
    """Shared Welch decision: pass if lower bound >= threshold (> if strict), fail if upper
    bound < threshold, else undecided; too few runs or zero variance -> undecided."""
    nb, nc = len(baseline), len(candidate)
    n_min = min(nb, nc)
    if n_min < 2:
        value = (sum(candidate) / nc - sum(baseline) / nb) if n_min else None
        reason = (
            f"{what}: {nb} baseline and {nc} candidate values; at least {th.min_runs} per arm "
            "are needed."
        )
        return CriterionResult(
            name, value, threshold, None, "undecided", reason, th.min_runs - n_min
        )
    c = welch(baseline, candidate)
    conf = f"{1 - th.alpha:.0%}"
    if c.df is None:
        reason = (
            f"{what}: every run in both arms has the same value (difference {c.diff:.4g}); "
            "with zero variance the test cannot say how reliable that is."
        )
        return CriterionResult(name, c.diff, threshold, None, "undecided", reason, None)
    lo, hi = one_sided_bounds(c, th.alpha)
    p = p_value_above(c, threshold)
    numbers = (
        f"{what}: difference {c.diff:+.4g} ({conf} one-sided bounds {lo:.4g} to {hi:.4g}, "
        f"Welch df {c.df:.1f}, p = {p:.3g}) against a threshold of {threshold:+.4g}"
    )
    passes = lo > threshold if strict_pass else lo >= threshold
    status: Status = "pass" if passes else ("fail" if hi < threshold else "undecided")
    needed: int | None = None
    if n_min < th.min_runs:
        provisional = f"provisionally {status}, but " if status != "undecided" else ""
        reason = (
            f"{numbers}; {provisional}one arm has only {n_min} values (< {th.min_runs}), "
            "so not decided."
        )
        needed = th.min_runs - n_min
        if status == "undecided":
            n_req = runs_needed_per_arm(
                c.var_baseline, c.var_candidate, c.diff - threshold, th.alpha
            )
            if n_req is not None:
                needed = max(needed, n_req - n_min)
        status = "undecided"
    elif status == "undecided":
        n_req = runs_needed_per_arm(c.var_baseline, c.var_candidate, c.diff - threshold, th.alpha)
        if n_req is None:
            reason = f"{numbers}; the estimate sits on the threshold, so more runs cannot decide."
        else:
            needed = max(1, n_req - n_min)
            reason = f"{numbers}; about {needed} more runs per arm would decide it."
    else:
        reason = f"{numbers}: {status}."
    return CriterionResult(name, c.diff, threshold, (lo, hi), status, reason, needed, p)


def _sequential_quality(
    what: str, baseline: list[float], candidate: list[float], th: GateThresholds
) -> CriterionResult:
    """Quality non-inferiority as an always-valid, group-sequential test."""
    n0 = max(th.min_runs, 2)
    design = SequentialDesign(alpha=th.alpha, min_runs=n0, max_runs=max(th.max_runs, n0))
    d = sequential_decision(baseline, candidate, -th.quality_margin, design, what)
    return CriterionResult(
        "quality_non_inferiority", d.value, -th.quality_margin, d.interval, d.status,
        d.reason, d.runs_needed_per_arm, d.p_value,
    )  # fmt: skip


def _cost(
    candidate: Sequence[RunFacts],
    target_runs_per_week: float,
    budget_usd: float,
    convention: str,
    th: GateThresholds,
) -> tuple[CriterionResult, Projection | None]:
    name = "projected_cost"
    if not candidate:
        reason = "No candidate runs to project the monthly cost from."
        return CriterionResult(name, None, budget_usd, None, "undecided", reason, th.min_runs), None
    proj = project_costs(
        candidate, [target_runs_per_week], convention=convention, budget_usd=budget_usd
    )
    cp = proj.cadences[0]
    status: Status = "pass" if cp.monthly_cost_usd <= budget_usd else "fail"
    reason = (
        f"At {target_runs_per_week:g} runs/week ({cp.runs_per_month:.3g}/month) the candidate's "
        f"median ${cp.cost_per_run_usd:,.2f}/run gives ${cp.monthly_cost_usd:,.0f}/month "
        f"(p10-p90 ${cp.monthly_cost_p10_usd:,.0f}-${cp.monthly_cost_p90_usd:,.0f}) against a "
        f"budget of ${budget_usd:,.0f}: {status}."
    )
    interval = (cp.monthly_cost_p10_usd, cp.monthly_cost_p90_usd)
    return CriterionResult(
        name, cp.monthly_cost_usd, budget_usd, interval, status, reason, None
    ), proj


def evaluate_gate(
    baseline: Sequence[RunFacts],
    candidate: Sequence[RunFacts],
    *,
    higher_is_better: bool = True,
    target_runs_per_week: float,
    budget_usd: float,
    convention: str = "calendar",
    thresholds: GateThresholds | None = None,
) -> GateResult:
    """Decide whether the candidate may run at the target cadence (DOMAIN.md §7).

    1. utilization_uplift, in percentage points (100 x utilization): Welch's t (1947) on
       candidate - baseline; pass if the one-sided (1 - alpha) lower bound >= the
       threshold, fail if the upper bound < it, else undecided.
    2. quality_non_inferiority: d = s (mean_c - mean_b), s = +1 if higher is better else
       -1; one-sided test of H0: d <= -margin, group-sequential so that checking after
       every run keeps the false-pass rate at alpha (app/planning/sequential.py): pass if
       the look's lower bound > -margin, fail if its upper bound < -margin, else
       undecided. Runs without a quality value are left out of this criterion.
    3. projected_cost: m x median candidate cost per run <= budget (see project_costs).

    Verdict: INSUFFICIENT_DATA if either arm has fewer than ``min_runs`` runs; otherwise
    FAIL if any criterion fails, INSUFFICIENT_DATA if any is undecided (including zero
    variance in both arms), PASS only when all pass. runs_needed_per_arm for an undecided
    criterion comes from :func:`app.planning.welch.runs_needed_per_arm` minus the
    smaller arm's current n (None when the estimate sits exactly on the threshold).
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
    )
    sign = 1.0 if higher_is_better else -1.0
    direction = "higher" if higher_is_better else "lower"
    quality = _sequential_quality(
        f"Quality ({direction} is better, sign-adjusted, margin {th.quality_margin:g})",
        [sign * r.quality_value for r in baseline if r.quality_value is not None],
        [sign * r.quality_value for r in candidate if r.quality_value is not None],
        th,
    )
    cost, proj = _cost(candidate, target_runs_per_week, budget_usd, convention, th)
    criteria = (util, quality, cost)
    nb, nc = len(baseline), len(candidate)
    statuses = {c.status for c in criteria}
    failed = [c.name for c in criteria if c.status == "fail"]
    open_ = [c.name for c in criteria if c.status == "undecided"]
    verdict: Verdict
    if min(nb, nc) < th.min_runs:
        verdict = "INSUFFICIENT_DATA"
        summary = (
            f"{nb} baseline and {nc} candidate runs: at least {th.min_runs} per arm are "
            "needed before the gate can pass."
        )
        if failed:
            summary += f" Already failing: {', '.join(failed)}."
    elif "fail" in statuses:
        verdict, summary = "FAIL", f"Failed: {', '.join(failed)}."
    elif "undecided" in statuses:
        verdict, summary = "INSUFFICIENT_DATA", f"Not yet decided: {', '.join(open_)}."
    else:
        verdict, summary = "PASS", "All three criteria pass."
    needed = [c.runs_needed_per_arm for c in criteria if c.runs_needed_per_arm is not None]
    return GateResult(
        verdict=verdict,
        criteria=criteria,
        summary=summary,
        baseline_runs=nb,
        candidate_runs=nc,
        runs_needed_per_arm=max(needed) if needed else None,
        projection=proj,
    )
