"""One run's contribution to the rollup sums (``run_rollup``), computed in Python.

The rollup keeps, per (pipeline, variant, ISO week, calendar month), the SUM() terms of
:class:`app.planning.goodput.GoodputTotals` and of the badput split in
:func:`app.analytics.repository.weekly_totals`, so org-wide readers add up a few rows per
pipeline instead of scanning runs. Ingest adds a run's terms, delete subtracts them.

Money depends on the pipeline's price for runs stored without their own price, and that
price can change at any time; so USD sums are kept only for priced runs
(``priced_cost``, ``pu_<cause>``) and the GPU-hours of unpriced runs are kept apart
(``unpriced_gpu_hours``, ``ug_<cause>``). A reader multiplies the latter by the
pipeline's price of the moment: a price change needs no rollup update.

The same terms are computed in SQL by ``app.rollups.repository.recompute``; the property
tests hold the two equal after random ingests, deletes and price changes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, date, datetime, timedelta
from typing import Any

CAUSES = ("productive", "idle", "data_stall", "checkpoint", "failure", "other_idle")
GOODPUT_SUMS = (
    "gpu_hours", "period", "unavailable", "held", "runtime_loss", "program", "mfu_hours",
)  # fmt: skip
SUMS = (
    *GOODPUT_SUMS,
    "priced_cost",
    "unpriced_gpu_hours",
    *(f"g_{c}" for c in CAUSES),
    *(f"pu_{c}" for c in CAUSES),
    *(f"ug_{c}" for c in CAUSES),
)
# The run columns the terms read.
INPUTS = (
    "variant", "started_at", "finished_at", "gpu_hours", "gpu_utilization",
    "price_per_gpu_hour", "data_stall_hours", "checkpoint_hours", "scheduling_wait_hours",
    "mfu", "lost_progress_hours", "resume_hours", "reschedule_hours",
)  # fmt: skip
KEY = ("pipeline_id", "variant", "week_start", "month_start")
Key = tuple[int, str, date, date]


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
    g_other_idle = 0, period = 2 * (0 + 2) = 4, held = 4, program = 4 * 0.75 = 3.
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
    mfu = run["mfu"]
    price = run["price_per_gpu_hour"]
    out = {
        "gpu_hours": g,
        "period": weff * (wait + t),
        "unavailable": weff * (wait + resched),
        "held": weff * (t - resched),
        "runtime_loss": weff * (resume + lost + ckpt),
        "program": g * (mfu if mfu is not None else u),
        "mfu_hours": g if mfu is not None else 0.0,
        "priced_cost": g * price if price is not None else 0.0,
        "unpriced_gpu_hours": 0.0 if price is not None else g,
    }
    for c, v in causes.items():
        out[f"g_{c}"] = v
        out[f"pu_{c}"] = v * price if price is not None else 0.0
        out[f"ug_{c}"] = 0.0 if price is not None else v
    return out


def deltas(runs: Iterable[tuple[int, Mapping[str, Any]]], sign: int = 1) -> list[dict[str, Any]]:
    """Rows to add to the rollup for these (pipeline_id, run values), one per key, sorted
    by key (so concurrent writers lock rollup rows in the same order). ``sign=-1``
    subtracts (a delete)."""
    acc: dict[Key, dict[str, Any]] = {}
    for pipeline_id, run in runs:
        key = (pipeline_id, run["variant"], *buckets(run["started_at"]))
        row = acc.setdefault(key, {"runs": 0, **dict.fromkeys(SUMS, 0.0)})
        row["runs"] += sign
        for name, value in terms(run).items():
            row[name] += sign * value
    return [dict(zip(KEY, key, strict=True)) | acc[key] for key in sorted(acc)]
