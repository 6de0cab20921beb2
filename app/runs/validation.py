"""Checks that need more than one field of a run record. Pure: no database."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from app.runs.schemas import RunIn

MAX_WALL_CLOCK_HOURS = 24 * 366
# gpu_hours may not exceed workers x wall clock by more than this (rounding in reports).
GPU_HOURS_TOLERANCE = 0.01


def wall_clock_hours(run: RunIn) -> float:
    """The attempt's wall clock; 0 for a running one (it has not finished)."""
    if run.finished_at is None:
        return 0.0
    return (run.finished_at - run.started_at).total_seconds() / 3600.0


def running_errors(run: RunIn) -> list[tuple[str, str]]:
    """A running attempt has no finish, billed hours or utilization yet; every other
    outcome has a finish."""
    if run.outcome != "running":
        if run.finished_at is None:
            return [("finished_at", "required unless outcome is 'running' (an attempt's start)")]
        return []
    sent = [
        (name, "a running attempt has none yet: send it with the final outcome")
        for name in ("finished_at", "gpu_hours", "gpu_utilization")
        if getattr(run, name) is not None
    ]
    return sent


def future_start_error(run: RunIn, now: datetime, tolerance_hours: float) -> tuple[str, str] | None:
    """A run that starts more than ``tolerance_hours`` after ``now`` (the server's clock)
    would become the pipeline's newest run for years: a clock or a year typed wrong.
    Example: now 2026-12-01 12:00, tolerance 24 h: a start at 2026-12-02 13:00 is refused."""
    latest = now + timedelta(hours=tolerance_hours)
    if run.started_at <= latest:
        return None
    return (
        "started_at",
        f"{run.started_at.isoformat()} is more than {tolerance_hours:g} h after the server's "
        f"clock ({now.isoformat(timespec='seconds')}): check the job's clock and the year "
        "(CADENCE_RUN_FUTURE_TOLERANCE_HOURS sets the limit)",
    )


def cross_field_errors(run: RunIn) -> list[tuple[str, str]]:
    """(field, reason) for every rule broken between fields; empty when the run is sound."""
    errors = running_errors(run)
    if errors or run.outcome == "running":
        return errors
    hours = wall_clock_hours(run)
    if hours <= 0:
        errors.append(("finished_at", "must be after started_at"))
        return errors
    if hours > MAX_WALL_CLOCK_HOURS:
        errors.append(("finished_at", f"run lasts {hours:.0f} h; more than a year is refused"))
    capacity = run.workers * hours
    if run.gpu_hours is not None and run.gpu_hours > capacity * (1 + GPU_HOURS_TOLERANCE):
        errors.append(
            (
                "gpu_hours",
                f"{run.gpu_hours:g} GPU-hours is more than workers x wall clock "
                f"({run.workers} x {hours:.4g} h = {capacity:.4g})",
            )
        )
    lost = sum(
        i.lost_progress_hours + i.resume_hours + i.reschedule_hours for i in run.interruptions
    )
    explained = run.data_stall_hours + run.checkpoint_hours + lost
    if explained > hours * (1 + 1e-9):
        errors.append(
            (
                "data_stall_hours",
                f"stall ({run.data_stall_hours:g} h) + checkpoint ({run.checkpoint_hours:g} h) "
                f"+ interruption time ({lost:g} h) = {explained:.4g} h is longer than the run "
                f"({hours:.4g} h)",
            )
        )
    return errors


def stored_values(run: RunIn) -> dict[str, Any]:
    """The column values a run record is stored with (defaults applied)."""
    hours = wall_clock_hours(run)
    return {
        "run_id": run.run_id,
        "variant": run.variant,
        "started_at": run.started_at,
        "finished_at": run.finished_at,
        "workers": run.workers,
        "gpu_type": run.gpu_type,
        "outcome": run.outcome,
        "retraining_id": run.retraining_id or run.run_id,
        "gpu_hours": run.gpu_hours if run.gpu_hours is not None else run.workers * hours,
        "gpu_utilization": run.gpu_utilization,
        "utilization_source": run.utilization_source,
        "price_per_gpu_hour": run.price_per_gpu_hour,
        "quality_metric": run.quality_metric,
        "quality_value": run.quality_value,
        "data_stall_hours": run.data_stall_hours,
        "checkpoint_hours": run.checkpoint_hours,
        "scheduling_wait_hours": run.scheduling_wait_hours,
        "mfu": run.mfu,
        "tags": dict(run.tags),
        "interruption_count": len(run.interruptions),
        "lost_progress_hours": float(sum(i.lost_progress_hours for i in run.interruptions)),
        "resume_hours": float(sum(i.resume_hours for i in run.interruptions)),
        "reschedule_hours": float(sum(i.reschedule_hours for i in run.interruptions)),
    }


def interruption_values(run: RunIn) -> list[dict[str, Any]]:
    return [
        {
            "position": n,
            "lost_progress_hours": i.lost_progress_hours,
            "resume_hours": i.resume_hours,
            "reschedule_hours": i.reschedule_hours,
            "cause": i.cause,
        }
        for n, i in enumerate(run.interruptions)
    ]
