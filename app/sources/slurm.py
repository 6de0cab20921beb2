"""Slurm accounting (``sacct --json`` or ``sacct -P``) -> Cadence run payloads. Pure.

One accounting record of a job is one attempt: ``sacct -D`` lists a requeued job once
per start, and every attempt of a job id is one retraining (``retraining_id``). The run
id is the cluster, the job id and the attempt's start, so a re-import (or a later
requeue) names each attempt the same way.

- GPUs: the count of ``gres/gpu`` in AllocTRES (``gres/gpu:a100=4`` also names the
  type); AllocGRES/GresUsed (``gpu:a100:4(IDX:0-3)``) when AllocTRES has none. A job
  without either is not guessed at: it is listed as unread (slurm_exporter #35 and
  SkyPilot #10285 are sites that read 0 GPUs from the wrong field).
- Times: wall clock from Start to End; scheduling wait from Eligible (else Submit) to
  Start: the time a runnable job queued, not a dependency's or a hold's.
- Utilization: ``gres/gpuutil`` of the steps' TRESUsageInAve (percent, NVML's
  utilization.gpu as Slurm's gpu plugin reads it), only when 0 < value <= 100; 0 (no
  GPU accounting plugin) and the "infinite" sentinels are unknown, never 0.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo
from typing import Any

from app.sources.hostlist import HostlistError, expand
from app.sources.posting import Mapped
from app.sources.posting import tags as clean_tags
from app.sources.sacct import PARSABLE_FIELDS, Attempt, SacctError, attempts

__all__ = ["PARSABLE_FIELDS", "Attempt", "Options", "SacctError", "map_all", "parse"]

TAG_VALUE_MAX = 500  # characters a tag's value holds

# Slurm state -> attempt outcome. A requeued attempt was taken away and started again.
OUTCOMES = {
    "COMPLETED": "succeeded",
    "FAILED": "failed",
    "TIMEOUT": "failed",
    "OUT_OF_MEMORY": "failed",
    "NODE_FAIL": "failed",
    "BOOT_FAIL": "failed",
    "DEADLINE": "failed",
    "PREEMPTED": "preempted",
    "REQUEUED": "preempted",
    "REQUEUE_FED": "preempted",
    "REQUEUE_HOLD": "preempted",
    "CANCELLED": "cancelled",
    "REVOKED": "cancelled",
}
UNFINISHED = {"PENDING", "RUNNING", "SUSPENDED", "CONFIGURING", "COMPLETING", "RESIZING"}
GPU_TRES = re.compile(r"^gres/gpu(?::([^=]+))?$")
GRES_GPU = re.compile(r"(?:^|,)gpu(?::([A-Za-z0-9_.-]+))?:(\d+)")
SLUG_BAD = re.compile(r"[^a-z0-9_-]+")


@dataclass(frozen=True)
class Options:
    pipeline: str | None = None  # one pipeline for every job
    pipeline_from: str = "name"  # else the job's "name" or "account", made a slug
    variant: str = "baseline"


def parse(text: str, tz: tzinfo = UTC) -> list[Attempt]:
    """Every record of sacct output held in ``text`` (tests; the importer streams)."""
    return list(attempts(io.StringIO(text), tz))


# -- mapping ---------------------------------------------------------------------------


def gpus(attempt: Attempt) -> tuple[int, str]:
    """(GPU count, GPU type) from AllocTRES, else from AllocGRES/GresUsed; (0, "")."""
    count, kind = 0.0, ""
    for key, value in attempt.tres.items():
        match = GPU_TRES.match(key)
        if match is None:
            continue
        if match.group(1):
            kind = kind or match.group(1)
        else:
            count = value
    if count == 0:  # only typed entries, or none
        count = sum(v for k, v in attempt.tres.items() if GPU_TRES.match(k) and ":" in k)
    if count == 0:
        for match in GRES_GPU.finditer(attempt.gres):
            count += int(match.group(2))
            kind = kind or (match.group(1) or "")
    return int(count), kind


def gpu_count_problem(attempt: Attempt) -> str | None:
    """Why a GPU count of AllocTRES is no count (``gres/gpu=inf``, ``nan``, -1, 2.5)."""
    for key, value in attempt.tres.items():
        if GPU_TRES.match(key) and not (
            math.isfinite(value) and 0 <= value <= 1e6 and value == int(value)
        ):
            return f"{key}={value:g} in AllocTRES is not a GPU count"
    return None


def plausible_utilization(values: Iterable[float]) -> float | None:
    """Mean of the steps' gres/gpuutil percentages that can be real, as a fraction."""
    usable = [v for v in values if 0 < v <= 100]
    return round(sum(usable) / len(usable) / 100, 6) if usable else None


def slug(text: str) -> str:
    value = SLUG_BAD.sub("-", text.lower()).strip("-_")[:63]
    return value.strip("-_")


def run_id(attempt: Attempt) -> str:
    start = attempt.start.strftime("%Y%m%dT%H%M%SZ") if attempt.start else "unstarted"
    return f"{retraining_id(attempt)}-{start}"


def retraining_id(attempt: Attempt) -> str:
    return f"slurm-{attempt.cluster or 'cluster'}-{attempt.job_id}"


def step_failed(attempt: Attempt) -> bool:
    """A step of this attempt exited non-zero. DerivedExitCode alone is the highest code
    of every step the job ever ran: after a requeue it still holds the first start's
    signalled steps (0:15), so the attempt's own steps decide when they were read."""
    if attempt.step_exits_read:
        return bool(attempt.failed_steps)
    return bool(attempt.derived_exit)


def hours(a: datetime, b: datetime) -> float:
    return max(0.0, (b - a).total_seconds() / 3600)


def map_attempt(attempt: Attempt, options: Options) -> Mapped:
    where = f"job {attempt.job_id}" + (f" ({attempt.name})" if attempt.name else "")
    if not attempt.job_id:
        return Mapped(where or "a record", reason="no job id")
    state = attempt.state.upper()
    # A job running now is a running attempt (no finish yet); the next import, once the
    # job has ended, completes it under the same run_id.
    running = state == "RUNNING" and attempt.start is not None
    if state in UNFINISHED and not running:
        return Mapped(where, reason=f"not finished (State {state})")
    outcome = "running" if running else OUTCOMES.get(state)
    if outcome is None:
        return Mapped(where, reason=f"State {state or '(empty)'} is not a finished state")
    if attempt.start is None or (attempt.end is None and not running):
        return Mapped(where, reason=f"{outcome}, but never started (no Start or End)")
    if attempt.end is not None and not running and attempt.end <= attempt.start:
        return Mapped(where, reason="End is not after Start")
    problem = gpu_count_problem(attempt)
    if problem is not None:
        return Mapped(where, reason=problem, invalid=True)
    workers, gpu_type = gpus(attempt)
    if workers < 1:
        return Mapped(where, reason="no GPUs allocated (no gres/gpu in AllocTRES or GresUsed)")
    pipeline = options.pipeline or slug(getattr(attempt, options.pipeline_from))
    if not pipeline:
        return Mapped(where, reason=f"no pipeline: the job's {options.pipeline_from} is empty")
    payload = _payload(attempt, attempt.start, options, pipeline, outcome, workers, gpu_type)
    if running or attempt.end is None:  # (never None when not running: checked above)
        return Mapped(where, payload)  # its utilization comes with its finish
    return _finished(attempt, attempt.end, where, payload)


def _payload(
    attempt: Attempt,
    start: datetime,
    options: Options,
    pipeline: str,
    outcome: str,
    workers: int,
    gpu_type: str,
) -> dict[str, Any]:
    """The run payload of a mapped attempt, without what only a finished one has."""
    failed_step = outcome == "succeeded" and step_failed(attempt)
    if failed_step:
        outcome = "failed"  # the script exited 0, but a step failed (DerivedExitCode)
    queued_from = attempt.eligible or attempt.submit
    payload: dict[str, Any] = {
        "pipeline": pipeline,
        "run_id": run_id(attempt),
        "retraining_id": retraining_id(attempt),
        "outcome": outcome,
        "variant": options.variant,
        "started_at": start.isoformat(),
        "workers": workers,
        "scheduling_wait_hours": round(hours(queued_from, start), 6) if queued_from else 0.0,
        "tags": _tags(attempt),
    }
    if failed_step:  # named only where they change the outcome, the same in both formats
        payload["tags"]["slurm_derived_exit_code"] = attempt.derived_exit or "?"
        payload["tags"]["slurm_failed_steps"] = ",".join(attempt.failed_steps)[:500] or "?"
    if gpu_type:
        payload["gpu_type"] = gpu_type[:64]
    return payload


def _finished(attempt: Attempt, end: datetime, where: str, payload: dict[str, Any]) -> Mapped:
    """A finished attempt: its finish and its utilization (unknown when implausible)."""
    payload["finished_at"] = end.isoformat()
    notes: tuple[str, ...] = ()
    utilization = plausible_utilization(attempt.gpu_util)
    if utilization is not None:
        payload["gpu_utilization"] = utilization
        payload["utilization_source"] = "nvml_gpu_util"
    elif attempt.gpu_util:
        shown = ", ".join(f"{v:g}" for v in attempt.gpu_util)
        notes = (f"gres/gpuutil {shown} is not a plausible percentage: utilization unknown",)
    return Mapped(where, payload, notes=notes)


def _tags(attempt: Attempt) -> dict[str, str]:
    tags = {
        "slurm_job_id": attempt.job_id,
        "slurm_job_name": attempt.name,
        "slurm_account": attempt.account,
        "slurm_partition": attempt.partition,
        "slurm_user": attempt.user,
        "slurm_cluster": attempt.cluster,
        "slurm_state": attempt.state.upper(),
        "slurm_nodes": _hosts(attempt.nodes),
    }
    return clean_tags(tags)


def _hosts(nodes: str) -> str:
    """The job's hosts, expanded and comma-separated, for the node-level DCGM matcher
    (``{slurm_nodes|any}``); "" when the list is unreadable or too long for a tag (the
    matcher then lists the run as lacking the tag, never matching a wrong node)."""
    try:
        hosts = ",".join(expand(nodes))
    except HostlistError:
        return ""
    return hosts if len(hosts) <= TAG_VALUE_MAX else ""  # cut, it would name wrong hosts


def map_all(attempts: Iterable[Attempt], options: Options) -> list[Mapped]:
    return [map_attempt(a, options) for a in attempts]
