"""One run's contribution to the rollup sums (``run_rollup``), computed in Python.

The rollup keeps, per (pipeline, variant, ISO week, calendar month), the SUM() terms of
:class:`app.planning.goodput.GoodputTotals` and of the badput split in
:func:`app.analytics.repository.weekly_totals`, so org-wide readers add up a few rows per
pipeline instead of scanning runs. Ingest adds a run's terms, delete subtracts them:
in SQL (``app.db.run_terms``, the same arithmetic) for batches and deletes, from
:func:`terms` here for the single-run PostgreSQL statement, which has no rows to sum.

Money is recorded spend, at the price frozen on each run when it was stored
(``billed_price_per_gpu_hour``), so a later pipeline price change leaves the rollups as
they are, like the runs. The USD columns (:data:`PRICED`) are linear in that price: the
single-run statement passes them per unit of price and multiplies by the price it froze.

The property tests hold the rollups equal to ``app.db.rollup.recompute`` (the SQL sums
over every run) after random ingests, single and batched, deletes and price changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, date, datetime, timedelta
from typing import Any

from app.planning.causes import BADPUT_CAUSES

CAUSES = ("productive", "idle", *BADPUT_CAUSES)
GOODPUT_SUMS = (
    "gpu_hours",
    "period",
    "unavailable",
    "held",
    "runtime_loss",
    "program",
    "mfu_hours",
    "unmeasured",
)
SUCCEEDED = "succeeded"
PRICED = ("cost", *(f"u_{c}" for c in CAUSES))
SUMS = (*GOODPUT_SUMS, *(f"g_{c}" for c in CAUSES), *PRICED)
KEY = ("pipeline_id", "variant", "week_start", "month_start")


def buckets(started_at: datetime) -> tuple[date, date]:
    """(Monday of the ISO week, first of the month) of a start time, in UTC."""
    day = started_at.astimezone(UTC).date()
    return day - timedelta(days=day.weekday()), day.replace(day=1)


def terms(run: Mapping[str, Any]) -> dict[str, float]:
    """The sums one run adds (``runs`` aside), from its stored column values.

    With T the wall clock in hours, weff = gpu_hours / T, idle = (1 - u) * gpu_hours,
    failure = lost + resume + reschedule, named = (stall + checkpoint + failure) * weff
    and scale = idle / named when named > idle else 1 (named causes never explain more
    than the idle time). Example: 2 workers, T = 2 h, gpu_hours = 4, u = 0.75, stall 0.5 h
    and nothing else: weff = 2, idle = 1, named = 1, scale = 1, g_data_stall = 1 GPU-h,
    g_other_idle = 0, period = 2 * (0 + 2) = 4, held = 4, progress = 2 * 2 = 4,
    busy = 0.75 * 4 = 3, program = min(3, 4) = 3.

    Attempts (methodology.md §2): an attempt that did not succeed made no progress that
    counts, so all of its GPU-hours are idle, under the cause ``failed`` (failed
    attempts); its held time is all runtime loss and its program term is 0 (the same
    2 x 2 h attempt, failed: g_idle = g_failed = 4, runtime_loss = 4, program = 0). A
    succeeded attempt without a utilization figure is unmeasured: its GPU-hours are
    neither productive nor idle (gpu_hours - productive - idle is the unmeasured share,
    so no sum of its own), and without MFU its forward progress (``unmeasured``) leaves
    the program factor's denominator, so it moves no utilization-based figure.
    Resumed progress (``resumed_from_hours``, methodology.md §2): :func:`_resumed`.
    """
    t = (run["finished_at"] - run["started_at"]).total_seconds() / 3600.0
    g = float(run["gpu_hours"])
    weff = g / t
    resched, wait = run["reschedule_hours"], run["scheduling_wait_hours"]
    succeeded = run.get("outcome", SUCCEEDED) == SUCCEEDED
    causes, program, runtime_loss, unmeasured_progress = _attempt_terms(run, t, g, weff)
    if succeeded and run.get("resumed_from_hours"):
        program, runtime_loss, unmeasured_progress = _resumed(
            run, (t, g, weff), causes, (program, runtime_loss, unmeasured_progress)
        )
    price = float(run["billed_price_per_gpu_hour"])
    out = {
        "gpu_hours": g,
        "period": weff * (wait + t),
        "unavailable": weff * (wait + resched),
        "held": weff * (t - resched),
        "runtime_loss": runtime_loss,
        "program": program,
        # GPU-hours of attempts that reported MFU (the rest were measured by the proxy,
        # or, failed or unmeasured, had no program to measure).
        "mfu_hours": g if run["mfu"] is not None else 0.0,
        "unmeasured": unmeasured_progress,
        "cost": g * price,
    }
    for c, v in causes.items():
        out[f"g_{c}"] = v
        out[f"u_{c}"] = v * price
    return out


def _attempt_terms(
    run: Mapping[str, Any], t: float, g: float, weff: float
) -> tuple[dict[str, float], float, float, float]:
    """(GPU-hours by cause, program, runtime loss, unmeasured progress) of an attempt:
    failed, succeeded unmeasured, or succeeded measured (see :func:`terms`)."""
    lost, resume, resched = run["lost_progress_hours"], run["resume_hours"], run["reschedule_hours"]
    stall, ckpt = run["data_stall_hours"], run["checkpoint_hours"]
    mfu = run["mfu"]
    if run.get("outcome", SUCCEEDED) != SUCCEEDED:
        return {**_no_causes(), "idle": g, "failed": g}, 0.0, weff * (t - resched), 0.0
    progress = max(weff * (t - resched - resume - lost - ckpt), 0.0)
    runtime_loss = weff * (resume + lost + ckpt)
    if run["gpu_utilization"] is None:
        program = mfu * progress if mfu is not None else 0.0
        unmeasured_progress = weff * (t - resched) - runtime_loss if mfu is None else 0.0
        return _no_causes(), program, runtime_loss, unmeasured_progress
    u = float(run["gpu_utilization"])
    causes = _measured_causes(u, g, weff, stall, ckpt, lost + resume + resched)
    busy = max(u * g - weff * lost, 0.0)
    program = mfu * progress if mfu is not None else min(busy, progress)
    return causes, program, runtime_loss, 0.0


def _resumed(
    run: Mapping[str, Any],
    sizes: tuple[float, float, float],
    causes: dict[str, float],
    sums: tuple[float, float, float],
) -> tuple[float, float, float]:
    """(program, runtime loss, unmeasured progress) of a succeeded attempt that resumed
    ``resumed_from_hours`` of progress from the checkpoints of earlier attempts of its
    retraining, its ``causes`` changed in place. It gives that progress back to them as
    its own terms (a rollup row sums runs one at a time and cannot reach the earlier
    attempt): resumed = resumed_from_hours x weff (its own effective workers: the same
    job, resumed) leaves ``failed`` and ``runtime_loss``, and counts as forward progress
    at this attempt's program ratio and utilization (u x resumed productive, the rest
    other idle). Only a succeeded attempt's report counts: one that resumed and then
    failed lost that progress again, and the attempt that finally succeeds reports all
    it resumed. Example: 8 workers, T = 3 h, u = 0.54, resumed 14 h: resumed = 112
    GPU-h; g_failed = -112, runtime_loss = -112, program = 0.54 x 24 + 0.54 x 112 =
    73.44, g_productive = 73.44, g_idle = 24 x 0.46 - 112 x 0.54 = -49.44."""
    t, g, weff = sizes
    program, runtime_loss, unmeasured = sums
    resumed = float(run["resumed_from_hours"]) * weff
    ratio = _program_ratio(run, t, g, weff)
    _give_back(causes, resumed, run["gpu_utilization"])
    if ratio is None:
        return program, runtime_loss - resumed, unmeasured + resumed
    return program + resumed * ratio, runtime_loss - resumed, unmeasured


def _program_ratio(run: Mapping[str, Any], t: float, g: float, weff: float) -> float | None:
    """Program GPU-hours per forward-progress GPU-hour of a succeeded attempt: its MFU,
    else its proxy min(busy, progress) / progress (0 without progress of its own); None
    when unknown (no utilization, no MFU)."""
    if run["mfu"] is not None:
        return float(run["mfu"])
    if run["gpu_utilization"] is None:
        return None
    lost, resume, ckpt = run["lost_progress_hours"], run["resume_hours"], run["checkpoint_hours"]
    progress = max(weff * (t - run["reschedule_hours"] - resume - lost - ckpt), 0.0)
    busy = max(float(run["gpu_utilization"]) * g - weff * lost, 0.0)
    return min(busy, progress) / progress if progress > 0 else 0.0


def _give_back(causes: dict[str, float], resumed: float, u: float | None) -> None:
    """Move ``resumed`` GPU-hours out of failed attempts (and idle) into work done:
    productive at utilization ``u``, the rest other idle; neither when unmeasured."""
    causes["failed"] -= resumed
    causes["idle"] -= resumed
    if u is not None:
        causes["productive"] += u * resumed
        causes["idle"] += (1.0 - u) * resumed
        causes["other_idle"] += (1.0 - u) * resumed


def _no_causes() -> dict[str, float]:
    return dict.fromkeys(CAUSES, 0.0)


def _measured_causes(
    u: float, g: float, weff: float, stall: float, ckpt: float, failure: float
) -> dict[str, float]:
    """A succeeded, measured attempt's GPU-hours by cause (see :func:`terms`)."""
    idle = (1.0 - u) * g
    named = (stall + ckpt + failure) * weff
    scale = idle / max(named, 1e-12) if named > idle else 1.0
    return {
        **_no_causes(),
        "productive": u * g,
        "idle": idle,
        "data_stall": stall * weff * scale,
        "checkpoint": ckpt * weff * scale,
        "failure": failure * weff * scale,
        "other_idle": max(idle - named, 0.0),
    }
