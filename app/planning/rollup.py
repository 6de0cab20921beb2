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

CAUSES = ("productive", "idle", "data_stall", "checkpoint", "failure", "other_idle")
GOODPUT_SUMS = (
    "gpu_hours",
    "period",
    "unavailable",
    "held",
    "runtime_loss",
    "program",
    "mfu_hours",
)
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
    """
    t = (run["finished_at"] - run["started_at"]).total_seconds() / 3600.0
    g = float(run["gpu_hours"])
    u = float(run["gpu_utilization"])
    weff = g / t
    lost, resume, resched = run["lost_progress_hours"], run["resume_hours"], run["reschedule_hours"]
    stall, ckpt, wait = (
        run["data_stall_hours"],
        run["checkpoint_hours"],
        run["scheduling_wait_hours"],
    )
    failure = lost + resume + resched
    idle = (1.0 - u) * g
    named = (stall + ckpt + failure) * weff
    scale = idle / max(named, 1e-12) if named > idle else 1.0
    causes = {
        "productive": u * g,
        "idle": idle,
        "data_stall": stall * weff * scale,
        "checkpoint": ckpt * weff * scale,
        "failure": failure * weff * scale,
        "other_idle": max(idle - named, 0.0),
    }
    # Program goodput's numerator (app.planning.goodput): useful time that made progress.
    progress = max(weff * (t - resched - resume - lost - ckpt), 0.0)
    busy = max(u * g - weff * lost, 0.0)
    mfu = run["mfu"]
    price = float(run["billed_price_per_gpu_hour"])
    out = {
        "gpu_hours": g,
        "period": weff * (wait + t),
        "unavailable": weff * (wait + resched),
        "held": weff * (t - resched),
        "runtime_loss": weff * (resume + lost + ckpt),
        "program": mfu * progress if mfu is not None else min(busy, progress),
        "mfu_hours": g if mfu is not None else 0.0,
        "cost": g * price,
    }
    for c, v in causes.items():
        out[f"g_{c}"] = v
        out[f"u_{c}"] = v * price
    return out
