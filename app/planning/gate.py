"""The A/B gate: may the pipeline move to the faster cadence? (methodology.md §7).

The verdict from the three criteria (:mod:`app.planning.gate_criteria`); the types are
in :mod:`app.planning.gate_types` and named here too, where callers import them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from app.planning.gate_criteria import (
    cost_criterion,
    median_cost,
    quality_missing,
    sequential_quality,
    statistical_criterion,
)
from app.planning.gate_types import MAX_REALISTIC_RUNS_PER_ARM as MAX_REALISTIC_RUNS_PER_ARM
from app.planning.gate_types import CriterionResult as CriterionResult
from app.planning.gate_types import GateResult as GateResult
from app.planning.gate_types import GateThresholds as GateThresholds
from app.planning.gate_types import Verdict as Verdict
from app.planning.model import PlanningError, RunFacts
from app.planning.projection import CALENDAR, Projection
from app.planning.scaling import ScalingModel
from app.planning.series_bill import SeriesContext
from app.planning.whatif import WhatIf


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
    series: SeriesContext | None = None,
) -> GateResult:
    """Decide whether the candidate may run at the target cadence (methodology.md §7).

    1. utilization_uplift, in percentage points (100 x utilization): Welch's t (1947) on
       candidate - baseline; pass if the one-sided (1 - alpha) lower bound >= the
       threshold, fail if the upper bound < it, else undecided.
    2. quality_non_inferiority: d = s (mean_c - mean_b), s = +1 if higher is better else
       -1; one-sided test of H0: d <= -margin, group-sequential so that checking after
       every run keeps the false-pass rate at alpha (app/planning/sequential.py): pass if
       the look's lower bound > -margin, fail if its upper bound < -margin, else
       undecided (runs without a quality value left out).
    3. projected_cost: the candidate's bill at the target cadence under the cost card's
       what-ifs and cost series (:func:`project_costs`), its ``cost_basis`` figure <= budget.

    Verdict: INSUFFICIENT_DATA if either arm has fewer than ``min_runs`` runs; otherwise
    FAIL if any criterion fails or cannot pass, INSUFFICIENT_DATA if any is undecided
    (including zero variance in both arms), PASS only when all pass. Runs still needed
    are for ``power`` (:func:`app.planning.welch.runs_needed_per_arm`), also in weeks at
    ``current_runs_per_week`` and in dollars (:func:`_runs_needed`)."""
    th = thresholds or GateThresholds()
    if budget_usd < 0 or target_runs_per_week < 0:
        raise PlanningError("budget and target cadence must be >= 0")
    cost, proj = cost_criterion(
        candidate, target_runs_per_week, budget_usd, convention, th, what_if, scaling_model, series
    )
    criteria = (
        _utilization(baseline, candidate, th),
        _quality(baseline, candidate, higher_is_better, th),
        cost,
    )
    return _result(criteria, proj, (baseline, candidate), what_if, th, current_runs_per_week)


def _result(
    criteria: tuple[CriterionResult, ...],
    proj: Projection | None,
    arms: tuple[Sequence[RunFacts], Sequence[RunFacts]],
    what_if: WhatIf | None,
    th: GateThresholds,
    current_runs_per_week: float | None,
) -> GateResult:
    """The gate's answer from its criteria: the verdict, its summary and the runs still
    needed (in weeks and dollars too)."""
    nb, nc = len(arms[0]), len(arms[1])
    verdict, summary = _verdict(criteria, nb, nc, th)
    most, weeks, usd, still = _runs_needed(criteria, arms, what_if, th, current_runs_per_week)
    return GateResult(
        verdict=verdict,
        criteria=criteria,
        summary=summary + still,
        baseline_runs=nb,
        candidate_runs=nc,
        runs_needed_per_arm=most,
        projection=proj,
        power=th.power,
        runs_needed_weeks=weeks,
        runs_needed_usd=usd,
    )


def _runs_needed(
    criteria: Sequence[CriterionResult],
    arms: tuple[Sequence[RunFacts], Sequence[RunFacts]],
    what_if: WhatIf | None,
    th: GateThresholds,
    current_runs_per_week: float | None,
) -> tuple[int | None, float | None, float | None, str]:
    """The most runs per arm a criterion still asks for, in weeks at today's cadence and
    in dollars (a median baseline and candidate run each), and the sentence saying so.

    The runs still needed are experiment runs of each arm as it is: each is priced at its
    own recorded utilization, so a utilization what-if (a hypothetical of the projection)
    does not price them; the what-if's price does. Example: baseline median 112 GPU-h
    (u = 0.38), candidate 60.8 GPU-h, $2/GPU-h, a 70% target: a pair costs $224 +
    $121.60 = $345.60, not 112 x 38/70 x $2 + ... for the baseline."""
    needed = [c.runs_needed_per_arm for c in criteria if c.runs_needed_per_arm is not None]
    if not needed:
        return None, None, None, ""
    most = max(needed)
    weeks = None
    if current_runs_per_week and most / current_runs_per_week < float("inf"):
        weeks = most / current_runs_per_week  # a denormal cadence: inf, "inf weeks"
    as_run = None if what_if is None else replace(what_if, utilization_target=None)
    usd = most * (median_cost(arms[0], as_run) + median_cost(arms[1], as_run))
    sentence = f" About {most} more runs per arm ({th.power:.0%} power)"
    if weeks is not None:
        sentence += f", {weeks:.1f} weeks at {current_runs_per_week:g} runs/week"
    return most, weeks, usd, sentence + f", ${usd:,.0f}."


def _utilization(
    baseline: Sequence[RunFacts], candidate: Sequence[RunFacts], th: GateThresholds
) -> CriterionResult:
    """The uplift in points of utilization (100 x u), Welch's t against the threshold."""
    return statistical_criterion(
        "utilization_uplift",
        "Utilization uplift (points)",
        [100.0 * r.gpu_utilization for r in baseline],
        [100.0 * r.gpu_utilization for r in candidate],
        th.min_utilization_uplift_points,
        th,
        strict_pass=False,
        unit="points",
    )


def _quality(
    baseline: Sequence[RunFacts],
    candidate: Sequence[RunFacts],
    higher_is_better: bool,
    th: GateThresholds,
) -> CriterionResult:
    """Quality non-inferiority on sign-adjusted values (runs without a value left out;
    an arm with none at all said so)."""
    sign = 1.0 if higher_is_better else -1.0
    direction = "higher" if higher_is_better else "lower"
    what = f"Quality ({direction} is better, sign-adjusted, margin {th.quality_margin:g})"
    return quality_missing(baseline, candidate, what) or sequential_quality(
        what,
        [sign * r.quality_value for r in baseline if r.quality_value is not None],
        [sign * r.quality_value for r in candidate if r.quality_value is not None],
        th,
    )


def _verdict(
    criteria: Sequence[CriterionResult], nb: int, nc: int, th: GateThresholds
) -> tuple[Verdict, str]:
    """The verdict and its summary (the rules in :func:`evaluate_gate`'s docstring)."""
    failed = [c.name for c in criteria if c.status == "fail"]
    cannot = [c.name for c in criteria if c.cannot_pass]
    open_ = [c.name for c in criteria if c.status == "undecided" and not c.cannot_pass]
    if min(nb, nc) < th.min_runs:
        summary = (
            f"{nb} baseline and {nc} candidate runs: at least {th.min_runs} per arm are "
            "needed before the gate can pass."
        )
        if failed:
            summary += f" Already failing: {', '.join(failed)}."
        if cannot:
            summary += f" Cannot pass: {', '.join(cannot)}."
        return "INSUFFICIENT_DATA", summary
    if failed or cannot:
        parts = [f"Failed: {', '.join(failed)}."] if failed else []
        parts += [f"Cannot pass: {', '.join(cannot)}."] if cannot else []
        return "FAIL", " ".join(parts)
    if any(c.status == "undecided" for c in criteria):
        return "INSUFFICIENT_DATA", f"Not yet decided: {', '.join(open_)}."
    return "PASS", "All three criteria pass."
