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

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo
from typing import Any

from app.sources.posting import Mapped
from app.sources.posting import tags as clean_tags

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
# The columns `cadence import slurm` asks sacct for (and a saved -P file must have the
# first eight of; AllocTRES or AllocGRES for the GPUs).
PARSABLE_FIELDS = (
    "JobIDRaw,JobID,JobName,Account,Cluster,Partition,User,State,Submit,Eligible,Start,End,"
    "AllocTRES,TRESUsageInAve"
)
REQUIRED_COLUMNS = ("JobID", "State", "Submit", "Start", "End")
GPU_TRES = re.compile(r"^gres/gpu(?::([^=]+))?$")
GRES_GPU = re.compile(r"(?:^|,)gpu(?::([A-Za-z0-9_.-]+))?:(\d+)")
SLUG_BAD = re.compile(r"[^a-z0-9_-]+")


class SacctError(Exception):
    """The accounting data cannot be read at all (not JSON, no header, no columns)."""


@dataclass
class Attempt:
    """One accounting record of a job, in the units both sacct formats share."""

    job_id: str
    name: str = ""
    account: str = ""
    cluster: str = ""
    partition: str = ""
    user: str = ""
    state: str = ""
    submit: datetime | None = None
    eligible: datetime | None = None
    start: datetime | None = None
    end: datetime | None = None
    tres: dict[str, float] = field(default_factory=dict)  # AllocTRES, e.g. gres/gpu -> 4
    gres: str = ""  # AllocGRES / GresUsed text, the fallback for GPUs
    gpu_util: list[float] = field(default_factory=list)  # steps' gres/gpuutil, percent


@dataclass(frozen=True)
class Options:
    pipeline: str | None = None  # one pipeline for every job
    pipeline_from: str = "name"  # else the job's "name" or "account", made a slug
    variant: str = "baseline"


# -- reading ---------------------------------------------------------------------------


def parse(text: str, tz: tzinfo = UTC) -> list[Attempt]:
    """Either format: JSON (``sacct --json``) or parsable text (``sacct -P``)."""
    if text.lstrip().startswith("{"):
        return parse_json(text)
    return parse_parsable(text, tz)


def parse_json(text: str) -> list[Attempt]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SacctError(f"not sacct --json output: {exc}") from exc
    jobs = data.get("jobs") if isinstance(data, dict) else None
    if not isinstance(jobs, list):
        raise SacctError('not sacct --json output: no "jobs" list')
    return [_json_attempt(j) for j in jobs if isinstance(j, dict)]


def _json_attempt(job: dict[str, Any]) -> Attempt:
    times = job.get("time") or {}
    state = job.get("state") or {}
    current = state.get("current") if isinstance(state, dict) else state
    if isinstance(current, list):
        current = current[0] if current else ""
    tres = {}
    for item in (job.get("tres") or {}).get("allocated") or []:
        kind, name = item.get("type", ""), item.get("name") or ""
        tres[f"{kind}/{name}" if name else kind] = _number(item.get("count"))
    util = []
    for step in job.get("steps") or []:
        average = ((step.get("tres") or {}).get("requested") or {}).get("average") or []
        for item in average:
            if item.get("type") == "gres" and item.get("name") == "gpuutil":
                value = _number(item.get("count"))
                if value is not None:
                    util.append(value)
    return Attempt(
        job_id=str(job.get("job_id", "")),
        name=str(job.get("name") or ""),
        account=str(job.get("account") or ""),
        cluster=str(job.get("cluster") or ""),
        partition=str(job.get("partition") or ""),
        user=str(job.get("user") or ""),
        state=str(current or ""),
        submit=_epoch(times.get("submission")),
        eligible=_epoch(times.get("eligible")),
        start=_epoch(times.get("start")),
        end=_epoch(times.get("end")),
        tres={k: v for k, v in tres.items() if v is not None},
        gres=str(job.get("used_gres") or ""),
        gpu_util=util,
    )


def _number(value: Any) -> float | None:
    """A count as sacct --json writes it: a number, or {set, infinite, number}."""
    if isinstance(value, dict):
        if not value.get("set", True) or value.get("infinite"):
            return None
        value = value.get("number")
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _epoch(value: Any) -> datetime | None:
    seconds = _number(value)
    if seconds is None or seconds <= 0:  # 0: not started / not ended yet
        return None
    return datetime.fromtimestamp(seconds, UTC)


def parse_parsable(text: str, tz: tzinfo = UTC) -> list[Attempt]:
    """``sacct -P -D --format=...``: a header, then a job's line and its steps' lines.

    Times are the cluster's local time as sacct printed them: ``tz`` says which (the
    importer runs sacct with TZ=UTC itself).
    """
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return []
    header = lines[0].split("|")
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
        raise SacctError(
            f"sacct -P output lacks column(s) {', '.join(missing)}; run sacct with "
            f"--format={PARSABLE_FIELDS}"
        )
    attempts: list[Attempt] = []
    for line in lines[1:]:
        row = dict(zip(header, line.split("|"), strict=False))
        raw = row.get("JobIDRaw") or row["JobID"]
        if "." in raw:  # a step (123.batch, 123.0): its usage belongs to the job above
            if attempts and attempts[-1].job_id == raw.split(".")[0]:
                attempts[-1].gpu_util += _tres_util(row.get("TRESUsageInAve", ""))
            continue
        attempts.append(_parsable_attempt(raw, row, tz))
    return attempts


def _parsable_attempt(job_id: str, row: dict[str, str], tz: tzinfo) -> Attempt:
    return Attempt(
        job_id=job_id,
        name=row.get("JobName", ""),
        account=row.get("Account", ""),
        cluster=row.get("Cluster", ""),
        partition=row.get("Partition", ""),
        user=row.get("User", ""),
        state=(row.get("State", "").split() or [""])[0],  # "CANCELLED by 1000"
        submit=_local(row.get("Submit", ""), tz),
        eligible=_local(row.get("Eligible", ""), tz),
        start=_local(row.get("Start", ""), tz),
        end=_local(row.get("End", ""), tz),
        tres=_tres(row.get("AllocTRES", "")),
        gres=row.get("AllocGRES", "") or row.get("GresUsed", ""),
        gpu_util=_tres_util(row.get("TRESUsageInAve", "")),
    )


def _local(value: str, tz: tzinfo) -> datetime | None:
    try:
        return datetime.fromisoformat(value).replace(tzinfo=tz).astimezone(UTC)
    except ValueError:  # Unknown, None, empty
        return None


def _tres(text: str) -> dict[str, float]:
    """``billing=8,cpu=8,gres/gpu:a100=4,gres/gpu=4,mem=64G,node=1`` -> counts."""
    found = {}
    for part in text.split(","):
        key, eq, value = part.partition("=")
        if eq and key.startswith("gres/"):
            try:
                found[key] = float(value)
            except ValueError:
                continue
    return found


def _tres_util(text: str) -> list[float]:
    value = _tres(text).get("gres/gpuutil")
    return [] if value is None else [value]


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
    workers, gpu_type = gpus(attempt)
    if workers < 1:
        return Mapped(where, reason="no GPUs allocated (no gres/gpu in AllocTRES or GresUsed)")
    pipeline = options.pipeline or slug(getattr(attempt, options.pipeline_from))
    if not pipeline:
        return Mapped(where, reason=f"no pipeline: the job's {options.pipeline_from} is empty")
    queued_from = attempt.eligible or attempt.submit
    payload: dict[str, Any] = {
        "pipeline": pipeline,
        "run_id": run_id(attempt),
        "retraining_id": retraining_id(attempt),
        "outcome": outcome,
        "variant": options.variant,
        "started_at": attempt.start.isoformat(),
        "workers": workers,
        "scheduling_wait_hours": round(hours(queued_from, attempt.start), 6)
        if queued_from
        else 0.0,
        "tags": _tags(attempt),
    }
    if gpu_type:
        payload["gpu_type"] = gpu_type[:64]
    if running or attempt.end is None:  # (never None when not running: checked above)
        return Mapped(where, payload)  # its utilization comes with its finish
    payload["finished_at"] = attempt.end.isoformat()
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
    }
    return clean_tags(tags)


def map_all(attempts: Iterable[Attempt], options: Options) -> list[Mapped]:
    return [map_attempt(a, options) for a in attempts]
