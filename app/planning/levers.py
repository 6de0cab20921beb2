"""Where to act first: each cause of badput priced per month at the target cadence."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from app.planning.causes import BADPUT_CAUSES, CAUSE_LABELS
from app.planning.economics import badput
from app.planning.model import PlanningError, RunFacts
from app.planning.scaling import (
    MIN_EFFICIENCY_TO_SCALE,
    MIN_UTILIZATION_TO_SCALE,
    scaling_cost_change,
)

# What to do about each cause; shown beside its label (LABELS), so no remedy repeats it.
REMEDIES: dict[str, str] = {
    "data_stall": (
        "Pre-shard the data into large sequential files, cache it on local disk, prefetch "
        "and add data-loader workers."
    ),
    "checkpoint": (
        "Write checkpoints asynchronously, or checkpoint at the optimal (Young/Daly) interval."
    ),
    "failure": "Checkpoint on the preemption notice, restart faster, keep hot spares.",
    "failed": (
        "Checkpoint more often and resume from the last checkpoint (report "
        "resumed_from_hours), and fix the crash the failed runs name."
    ),
    "scheduling_wait": "Reserve capacity or buy committed capacity for the retraining window.",
    "other_idle": "Profile the training step to see where the time goes.",
    "workers": (
        "Utilization and scaling efficiency are both high, so more workers shorten wall "
        "clock; the GPU-hours per run change by 1/efficiency - 1."
    ),
}

# The causes' labels, and the two levers that are not a cause of badput.
LABELS: dict[str, str] = {
    **CAUSE_LABELS,
    "scheduling_wait": "Scheduling / queue wait",
    "workers": "Add workers",
}


@dataclass(frozen=True)
class Lever:
    """One cause of badput at the target cadence, in GPU-hours and USD per month.

    ``billed`` is False for scheduling waits: queue time before the start delays the run
    but is not paid for, so its USD and savings are 0 and ``wall_clock_hours_per_month``
    carries its size.
    """

    cause: str
    label: str
    gpu_hours_per_month: float
    usd_per_month: float
    saving_if_halved_usd: float
    saving_if_removed_usd: float
    wall_clock_hours_per_month: float
    billed: bool
    remedy: str
    working: str


def _mean(values: Sequence[float]) -> float:
    return float(statistics.fmean(values)) if values else 0.0


def rank_levers(
    runs: Sequence[RunFacts],
    *,
    runs_per_month: float,
    price: float | None = None,
    utilization: float | None = None,
    efficiency: float | None = None,
    min_utilization_for_workers: float = MIN_UTILIZATION_TO_SCALE,
    min_efficiency_for_workers: float = MIN_EFFICIENCY_TO_SCALE,
) -> list[Lever]:
    """Rank the badput causes by monthly cost, largest first.

    For each cause (data_stall, checkpoint, failure, other_idle from
    :func:`app.planning.economics.badput`, scheduling_wait = Q * Weff, and failed = the
    GPU-hours of the retraining's failed attempts less the progress the run resumed from
    them, :attr:`RunFacts.failed_badput_gpu_hours`), take the
    mean per-run GPU-hours and mean per-run USD (GPU-hours x ``price``, or each run's
    own price when ``price`` is None; pass the scenario's price so every dollar on a page
    uses it) and multiply by ``runs_per_month``. The mean, not the median: a lever's
    worth is its expected monthly cost, and rare causes (failures hit a few runs) have a
    median of zero however much they cost; saving_if_halved = USD / 2,
    saving_if_removed = USD. A "workers" lever (no saving; it buys time, not money) is
    added only when ``utilization`` (default: median of the runs) >=
    ``min_utilization_for_workers`` and ``efficiency`` (from a scaling probe) >=
    ``min_efficiency_for_workers``; its GPU-hours and USD are the *extra* cost of
    scaling, monthly G x (1/E - 1), negative savings (it buys time, not money).
    """
    if runs_per_month < 0 or (price is not None and price < 0):
        raise PlanningError("runs per month and price must be >= 0")
    per_run = _per_run(runs, price)
    if not any(r.failed_attempts_gpu_hours > 0 for r in runs):
        del per_run["failed"]  # no retraining in the window had a failed attempt
    levers = [_cause_lever(cause, rows, runs_per_month) for cause, rows in per_run.items()]
    levers.sort(key=lambda lv: (-lv.usd_per_month, -lv.gpu_hours_per_month))
    if utilization is None and runs:
        utilization = float(statistics.median(r.gpu_utilization for r in runs))
    if (
        utilization is not None
        and efficiency is not None
        and utilization >= min_utilization_for_workers
        and efficiency >= min_efficiency_for_workers
    ):
        working = (
            f"Utilization {utilization:.0%} >= {min_utilization_for_workers:.0%} and "
            f"efficiency {efficiency:.0%} >= {min_efficiency_for_workers:.0%}: "
        )
        levers.append(_workers_lever(runs, runs_per_month, price, efficiency, working))
    return levers


def _per_run(
    runs: Sequence[RunFacts], price: float | None
) -> dict[str, list[tuple[float, float, float]]]:
    """Per cause, each run's (GPU-hours, USD, wall-clock hours); waiting is not billed."""
    per_run: dict[str, list[tuple[float, float, float]]] = {
        c: [] for c in (*BADPUT_CAUSES, "scheduling_wait")
    }
    for run in runs:
        b = badput(run)
        p = run.price_per_gpu_hour if price is None else price
        weff = run.effective_workers
        hours = {
            "data_stall": (b.data_stall, True),
            "checkpoint": (b.checkpoint, True),
            "failure": (b.failure, True),
            "other_idle": (b.other_idle, True),
            "scheduling_wait": (run.scheduling_wait_hours * weff, False),
        }
        for cause, (gpu_h, billed) in hours.items():
            per_run[cause].append((gpu_h, gpu_h * p if billed else 0.0, gpu_h / weff))
        per_run["failed"].append(_failed_row(run, price))
    return per_run


def _failed_row(run: RunFacts, price: float | None) -> tuple[float, float, float]:
    """The run's failed-attempt badput: (GPU-hours, USD, wall-clock hours at Weff). USD
    at ``price``, else at the failed attempts' own price (their cost per GPU-hour)."""
    gpu_h = run.failed_badput_gpu_hours
    if price is not None:
        usd = gpu_h * price
    elif run.failed_attempts_gpu_hours > 0:
        usd = run.failed_attempts_cost_usd * gpu_h / run.failed_attempts_gpu_hours
    else:
        usd = 0.0
    return gpu_h, usd, gpu_h / run.effective_workers


def _cause_lever(
    cause: str, rows: Sequence[tuple[float, float, float]], runs_per_month: float
) -> Lever:
    """One cause's monthly means; halving it saves half its USD, removing it all."""
    gpu_h = _mean([r[0] for r in rows]) * runs_per_month
    usd = _mean([r[1] for r in rows]) * runs_per_month
    wall = _mean([r[2] for r in rows]) * runs_per_month
    billed = cause != "scheduling_wait"
    working = (
        f"Mean per run {gpu_h / runs_per_month if runs_per_month else 0.0:.2f} GPU-h "
        f"x {runs_per_month:.3g} runs/month = {gpu_h:.1f} GPU-h"
        + (f", ${usd:,.0f}/month." if billed else " of waiting (not billed).")
    )
    return Lever(
        cause, LABELS[cause], gpu_h, usd, usd / 2, usd, wall, billed, REMEDIES[cause], working
    )


def _workers_lever(
    runs: Sequence[RunFacts],
    runs_per_month: float,
    price: float | None,
    efficiency: float,
    working: str,
) -> Lever:
    """More workers at efficiency E: monthly G x (1/E - 1) extra, a negative saving."""
    rel = scaling_cost_change(efficiency)
    extra_g = _mean([r.gpu_hours for r in runs]) * runs_per_month * rel
    extra_usd = (
        _mean([r.gpu_hours * (r.price_per_gpu_hour if price is None else price) for r in runs])
        * runs_per_month
        * rel
    )
    working += f"GPU-hours {rel:+.0%} = {extra_g:+,.0f} GPU-h, ${extra_usd:+,.0f}/month."
    return Lever(
        "workers",
        LABELS["workers"],
        extra_g,
        extra_usd,
        -extra_usd,
        -extra_usd,
        0.0,
        True,
        REMEDIES["workers"],
        working,
    )
