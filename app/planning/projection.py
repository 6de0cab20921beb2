"""Monthly cost at a chosen retraining cadence (methodology.md §5)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from app.planning.bill import DEFAULT_DRAWS, BillForecast, FailureWindow
from app.planning.budget_status import DEFAULT_RISK_TOLERANCE, fits_budget
from app.planning.durations import week_capacity_warnings
from app.planning.model import PlanningError, RunFacts
from app.planning.scaling import ScalingModel
from app.planning.schedule import CALENDAR as CALENDAR
from app.planning.schedule import WEEKS_PER_MONTH as WEEKS_PER_MONTH
from app.planning.schedule import MonthConvention as MonthConvention
from app.planning.schedule import runs_per_month as runs_per_month
from app.planning.schedule import weeks_per_month as weeks_per_month
from app.planning.series_bill import SeriesContext, biller
from app.planning.verdict import bill_at_risk
from app.planning.whatif import AdjustedRun, WhatIf, apply_what_if


@dataclass(frozen=True)
class CadenceProjection:
    """Projected spend at one cadence.

    The bill (:func:`app.planning.bill.forecast_bill`, typical month): ``expected_bill_usd``
    = ``runs_in_month`` x mean cost per run, exact; ``bill_p10/p50/p90_usd``,
    ``p_over_budget`` (None without a budget) and ``bill_at_risk_usd`` from its draws.

    The monthly figure everywhere is that bill: ``monthly_cost_usd`` is
    ``expected_bill_usd``, its band (``monthly_cost_p10/p90_usd``) the bill's p10..p90,
    ``headroom_usd`` is budget - expected bill, and ``within_budget`` is the one test
    (:func:`app.planning.budget_status.fits_budget`), never the expected bill alone.
    Per-run figures are the typical (median) run of the window ("a typical retraining
    costs $X"), never the month. ``vs_current_ratio`` = monthly cost / today's bill.
    """

    runs_per_week: float
    runs_per_month: float
    gpu_hours_per_run: float
    wall_clock_hours_per_run: float
    cost_per_run_usd: float
    monthly_gpu_hours: float
    monthly_cost_usd: float
    monthly_cost_p10_usd: float
    monthly_cost_p90_usd: float
    p_over_budget: float | None
    headroom_usd: float | None
    within_budget: bool | None
    vs_current_ratio: float | None
    working: tuple[str, ...]
    runs_in_month: float = 0.0
    mean_cost_per_run_usd: float = 0.0
    expected_bill_usd: float = 0.0
    bill_p10_usd: float = 0.0
    bill_p50_usd: float = 0.0
    bill_p90_usd: float = 0.0
    bill_at_risk_usd: float = 0.0  # the (1 - risk tolerance) quantile: p90 at 10%


@dataclass(frozen=True)
class Projection:
    """Cost projections for several cadences, plus today's baseline for comparison.

    ``current_monthly_cost_usd`` is today's expected bill *without* what-ifs at
    ``current_runs_per_week`` (the cost series' figure when the caller gives it,
    ``app.analytics.bill_now``). ``warnings`` list what-ifs that could not be applied.
    """

    convention: str
    weeks_per_month: float
    runs_used: int
    cadences: tuple[CadenceProjection, ...]
    current_runs_per_week: float | None
    current_monthly_cost_usd: float | None
    current_monthly_gpu_hours: float | None
    budget_usd: float | None
    what_if: WhatIf | None
    warnings: tuple[str, ...]
    notes: tuple[str, ...]


def project_costs(
    runs: Sequence[RunFacts],
    cadences: Sequence[float],
    *,
    convention: str = CALENDAR,
    budget_usd: float | None = None,
    current_runs_per_week: float | None = None,
    what_if: WhatIf | None = None,
    scaling_model: ScalingModel | None = None,
    seed: int = 0,
    current_runs: Sequence[RunFacts] | None = None,
    risk_tolerance: float = DEFAULT_RISK_TOLERANCE,
    series: SeriesContext | None = None,
    current_cost_usd: float | None = None,
) -> Projection:
    """Monthly cost at each cadence from recent runs of one variant (methodology.md §5).

    Each run is adjusted by the what-ifs (:func:`app.planning.whatif.apply_what_if`); at
    k runs per week (m = k * weeks_per_month(convention) a month) the figures of
    :class:`CadenceProjection`, from :func:`app.planning.bill.forecast_bill` (``series``:
    series_bill.py) of retrainings (a run plus its failed attempts); monthly GPU-hours =
    m x the mean's. Today's bill: ``current_cost_usd`` (the series' figure,
    ``app.analytics.bill_now``) or the mean of ``current_runs`` (production's for a
    candidate; default ``runs``) at ``current_runs_per_week``. Without runs:
    :class:`PlanningError` (see :func:`project_from_inputs`)."""
    _check(runs, budget_usd)
    adjusted, warnings = _adjusted(runs, what_if, scaling_model)
    costs = [a.cost_usd for a in adjusted]
    window = _bill_window(runs, costs, what_if, scaling_model)
    typical = _typical(runs, adjusted)
    current_cost, current_gpu = _today(
        current_runs or runs, current_runs_per_week, convention, current_cost_usd
    )
    bill_at = biller(window, costs, series, convention, budget_usd, seed, warnings)
    limits, today = (budget_usd, risk_tolerance), (current_runs_per_week, current_cost)
    projected = [_at_cadence(k, convention, bill_at(k), typical, limits, today) for k in cadences]
    return Projection(
        convention=convention,
        weeks_per_month=weeks_per_month(convention),
        runs_used=len(runs),
        cadences=tuple(projected),
        current_runs_per_week=current_runs_per_week,
        current_monthly_cost_usd=current_cost,
        current_monthly_gpu_hours=current_gpu,
        budget_usd=budget_usd,
        what_if=what_if,
        warnings=(*warnings, *week_capacity_warnings(cadences, typical.wall_clock_hours)),
        notes=_notes(len(runs), what_if, seed),
    )


def _check(runs: Sequence[RunFacts], budget_usd: float | None) -> None:
    """What no projection can be made from: no runs, a negative budget."""
    if not runs:
        raise PlanningError("no runs to project from; use project_from_inputs")
    if budget_usd is not None and budget_usd < 0:
        raise PlanningError("budget must be >= 0")


@dataclass(frozen=True)
class _Typical:
    """The window's typical (median) run and its mean GPU-hours per retraining."""

    runs: int
    cost_usd: float
    gpu_hours: float
    wall_clock_hours: float
    mean_gpu_hours: float


def _typical(runs: Sequence[RunFacts], adjusted: Sequence[AdjustedRun]) -> _Typical:
    gpu_hours = [
        a.gpu_hours + r.failed_attempts_gpu_hours for a, r in zip(adjusted, runs, strict=True)
    ]
    return _Typical(
        runs=len(runs),
        cost_usd=float(np.median([a.cost_usd for a in adjusted])),
        gpu_hours=float(np.median([a.gpu_hours for a in adjusted])),
        wall_clock_hours=float(np.median([a.wall_clock_hours for a in adjusted])),
        mean_gpu_hours=math.fsum(gpu_hours) / len(runs),
    )


def _adjusted(
    runs: Sequence[RunFacts], what_if: WhatIf | None, scaling_model: ScalingModel | None
) -> tuple[list[AdjustedRun], list[str]]:
    """Each run under the what-ifs, and every distinct warning they raised, in order."""
    warnings: list[str] = []
    adjusted = []
    for run in runs:
        adj, run_warnings = apply_what_if(run, what_if, scaling_model)
        adjusted.append(adj)
        warnings.extend(w for w in run_warnings if w not in warnings)
    return adjusted, warnings


def _today(
    today: Sequence[RunFacts], runs_per_week: float | None, convention: str, given: float | None
) -> tuple[float | None, float | None]:
    """Today's expected bill and GPU-hours a month: the same mean retraining (failed
    attempts included) at today's cadence, as observed, or the bill ``given`` (None
    without a cadence)."""
    if runs_per_week is None:
        return None, None
    m_now = runs_per_month(runs_per_week, convention)
    cost = m_now * math.fsum(r.retraining_cost_usd for r in today) / len(today)
    cost = cost if given is None else given
    return cost, m_now * _mean_gpu_hours(today)


def _at_cadence(
    k: float,
    convention: str,
    bill: BillForecast,
    typical: _Typical,
    budget: tuple[float | None, float],
    current: tuple[float | None, float | None],
) -> CadenceProjection:
    """One cadence's projection from its bill; ``budget`` is (budget, risk tolerance),
    ``current`` (today's runs per week, today's expected bill)."""
    budget_usd, tolerance = budget
    m = runs_per_month(k, convention)
    monthly = bill.expected_bill_usd
    working = [
        f"{k:g} runs/week x {weeks_per_month(convention):.4g} weeks/month = {m:.4g} runs/month.",
        f"A typical retraining (median of {typical.runs}): {typical.gpu_hours:.1f} GPU-h, "
        f"${typical.cost_usd:,.2f}.",
        *bill.working,
    ]
    headroom = within = None
    if budget_usd is not None:
        p_over = bill.p_over_budget or 0.0
        headroom, within = budget_usd - monthly, fits_budget(p_over, tolerance)
        working.append(
            f"Budget ${budget_usd:,.0f}: {p_over:.0%} chance the bill is over it, "
            f"{'below' if within else 'not below'} the {tolerance:.0%} risk tolerance: "
            f"{'fits' if within else 'does not fit'}."
        )
    ratio = None
    current_runs_per_week, current_cost = current
    if current_cost is not None and current_cost > 0:
        ratio = monthly / current_cost
        working.append(
            f"vs today ({current_runs_per_week:g}/week, ${current_cost:,.0f}/month): "
            f"x{ratio:.3g} ({ratio - 1:+.1%})."
        )
    return CadenceProjection(
        runs_per_week=k,
        runs_per_month=m,
        gpu_hours_per_run=typical.gpu_hours,
        wall_clock_hours_per_run=typical.wall_clock_hours,
        cost_per_run_usd=typical.cost_usd,
        monthly_gpu_hours=m * typical.mean_gpu_hours,
        monthly_cost_usd=monthly,
        monthly_cost_p10_usd=bill.bill_p10_usd,
        monthly_cost_p90_usd=bill.bill_p90_usd,
        p_over_budget=bill.p_over_budget,
        headroom_usd=headroom,
        within_budget=within,
        vs_current_ratio=ratio,
        working=tuple(working),
        bill_at_risk_usd=bill_at_risk(bill.draws, tolerance),
        **_bill_fields(bill),
    )


def _notes(runs: int, what_if: WhatIf | None, seed: int) -> tuple[str, ...]:
    notes = [
        f"Band: p10-p90 of the month's bill, from {DEFAULT_DRAWS} bootstrap months of the "
        f"{runs} retraining costs (seed {seed})."
    ]
    if what_if is not None and not what_if.is_empty:
        notes.insert(0, _what_if_note(what_if))
    if runs < 3:
        notes.append(f"Only {runs} run(s): the p10-p90 band is not meaningful.")
    return tuple(notes)


def _mean_gpu_hours(runs: Sequence[RunFacts]) -> float:
    """Mean GPU-hours per retraining, its failed attempts included."""
    return math.fsum(r.gpu_hours + r.failed_attempts_gpu_hours for r in runs) / len(runs)


def _bill_fields(bill: BillForecast) -> dict[str, float]:
    return {
        "runs_in_month": bill.runs_in_month,
        "mean_cost_per_run_usd": bill.mean_retraining_usd,
        "expected_bill_usd": bill.expected_bill_usd,
        "bill_p10_usd": bill.bill_p10_usd,
        "bill_p50_usd": bill.bill_p50_usd,
        "bill_p90_usd": bill.bill_p90_usd,
    }


def _bill_window(
    runs: Sequence[RunFacts],
    costs: list[float],
    what_if: WhatIf | None,
    scaling_model: ScalingModel | None,
) -> list[float] | FailureWindow:
    """What the bill resamples: each retraining's cost under the what-ifs (the run plus its
    retraining's failed attempts) or, with a failure rate that differs from the recorded
    one, the failure model instead of the failed attempts (methodology.md §5.3):
    per run the cost at rate 0, the expected failures lambda x Weff x T0 and one
    failure's cost. Every later what-if scales T linearly, so (cost at lambda - cost
    at 0) / expected failures is one failure's cost with all what-ifs applied."""
    modelled = what_if is not None and what_if.changes_failure_rate
    if what_if is None or not modelled or what_if.checkpoint_interval_hours is None:
        return [c + _failed_attempts_usd(r, c, what_if) for r, c in zip(runs, costs, strict=True)]
    rate = what_if.failure_rate_per_instance_hour or 0.0
    at_zero = replace(what_if, failure_rate_per_instance_hour=0.0)
    base, expected, per = [], [], []
    for run, cost in zip(runs, costs, strict=True):
        free = apply_what_if(run, at_zero, scaling_model)[0].cost_usd
        recorded = sum(i.total_hours for i in run.interruptions)
        t0 = max(run.wall_clock_hours - recorded, 1e-9)
        mu = rate * run.effective_workers * t0
        base.append(free)
        expected.append(mu)
        per.append((cost - free) / mu if mu > 0 else 0.0)
    return FailureWindow(tuple(base), tuple(expected), tuple(max(p, 0.0) for p in per))


def _failed_attempts_usd(run: RunFacts, adjusted_cost: float, what_if: WhatIf | None) -> float:
    """The retraining's failed attempts under the what-ifs: their GPU-hours scale as the
    succeeded attempt's did (the same job at the same workers and utilization), at the
    what-if price when one is given, else at their own."""
    if run.failed_attempts_gpu_hours == 0.0:
        return 0.0
    if what_if is None or what_if.is_empty or run.cost_usd == 0.0:
        return run.failed_attempts_cost_usd
    price = what_if.price
    if price is None:  # cost scales with GPU-hours at unchanged prices
        return run.failed_attempts_cost_usd * adjusted_cost / run.cost_usd
    scale = adjusted_cost / (price * run.gpu_hours) if price > 0 else 0.0
    return run.failed_attempts_gpu_hours * scale * price


def _what_if_note(w: WhatIf) -> str:
    parts = []
    if w.workers is not None:
        parts.append(f"{w.workers} workers: T x C(G/T)/C(N), G = N x T")
    if w.utilization_target is not None:
        parts.append(f"utilization target {w.utilization_target:.0%}: G x u_now/u_target")
    if w.failure_rate_per_instance_hour is not None:
        parts.append(
            f"failure rate {w.failure_rate_per_instance_hour:g}/instance-h replaces the "
            "recorded failure loss: T0/M x (interval/2 + resume + reschedule) x G/T"
        )
    if w.price is not None:
        parts.append(f"price ${w.price:g}/GPU-h")
    return "What-ifs applied per run: " + "; ".join(parts) + "."


def project_from_inputs(
    *,
    workers: int,
    wall_clock_hours: float,
    utilization: float,
    price_per_gpu_hour: float,
    cadences: Sequence[float],
    gpu_hours: float | None = None,
    convention: str = CALENDAR,
    budget_usd: float | None = None,
    current_runs_per_week: float | None = None,
    what_if: WhatIf | None = None,
    scaling_model: ScalingModel | None = None,
    data_stall_hours: float = 0.0,
    checkpoint_hours: float = 0.0,
) -> Projection:
    """Projection for a team with no recorded runs: one typical run described by hand.

    Builds a single :class:`RunFacts` (G = workers * T unless ``gpu_hours`` is given) and
    calls :func:`project_costs`; with one run the p10-p90 band collapses to the point.
    """
    run = RunFacts(
        workers=workers,
        wall_clock_hours=wall_clock_hours,
        gpu_hours=gpu_hours if gpu_hours is not None else workers * wall_clock_hours,
        gpu_utilization=utilization,
        price_per_gpu_hour=price_per_gpu_hour,
        data_stall_hours=data_stall_hours,
        checkpoint_hours=checkpoint_hours,
    )
    result = project_costs(
        [run],
        cadences,
        convention=convention,
        budget_usd=budget_usd,
        current_runs_per_week=current_runs_per_week,
        what_if=what_if,
        scaling_model=scaling_model,
    )
    notes = [
        f"From inputs: {workers} workers x {wall_clock_hours:g} h = {run.gpu_hours:g} GPU-h "
        f"at {utilization:.0%} utilization; one described run, so no spread band."
    ]
    notes.extend(n for n in result.notes if not n.startswith(("Only ", "Band: ")))
    return replace(result, notes=tuple(notes))
