"""Kueue Workloads (``kueue.x-k8s.io`` v1beta2, or v1beta1) read for what they admitted
and how often they were evicted; one finished attempt split into its admissions. Pure.

- GPUs: the admission's ``podSetAssignments[].resourceUsage`` (the pod set's total),
  else ``count`` pods of the pod set's template; without Kueue, the pods' (else the
  templates') limits, else requests, times their replicas.
- Earlier admissions: ``accumulatedPastExecutionTimeSeconds`` (v1beta1 spells it
  ``accumulatedPastExexcutionTimeSeconds``), evictions from ``schedulingStats.evictions``
  (else ``requeueState.count``), laid out by ``app.planning.gpu_shares.admissions``.
"""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import datetime
from typing import Any

from app.planning.gpu_shares import Gpus, admissions, count_gpus
from app.sources.posting import Mapped

PAST = ("accumulatedPastExecutionTimeSeconds", "accumulatedPastExexcutionTimeSeconds")
INTEGER = re.compile(r"^\d+$")
GPU_PREFIXES = ("nvidia.com/", "amd.com/")


def parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for c in obj.get("status", {}).get("conditions") or []:
        if isinstance(c, dict) and c.get("type") == kind and c.get("status") == "True":
            return c
    return None


def quantity(value: Any) -> int:
    text = str(value)
    return int(text) if INTEGER.match(text) else 0


def pod_usage(pod_spec: dict[str, Any], times: int = 1) -> dict[str, int]:
    """GPU resources of one pod (each container's limits, else its requests) x times."""
    usage: dict[str, int] = {}
    for container in pod_spec.get("containers") or []:
        resources = container.get("resources") or {}
        asked = resources.get("limits") or resources.get("requests") or {}
        for name, value in asked.items():
            if name.startswith(GPU_PREFIXES):
                usage[name] = usage.get(name, 0) + quantity(value) * times
    return usage


def add(total: dict[str, int], more: dict[str, int]) -> dict[str, int]:
    return {k: total.get(k, 0) + more.get(k, 0) for k in {*total, *more}}


def admitted_usage(workload: dict[str, Any]) -> dict[str, int] | None:
    """The GPU resources Kueue admitted; None when the workload holds no admission."""
    admission = workload.get("status", {}).get("admission") or {}
    assigned = admission.get("podSetAssignments") or []
    if not assigned:
        return None
    templates = {s.get("name"): s for s in workload.get("spec", {}).get("podSets") or []}
    usage: dict[str, int] = {}
    for a in assigned:
        total = {k: quantity(v) for k, v in (a.get("resourceUsage") or {}).items()}
        if not total:  # older Kueue: the pod set's template times the admitted count
            pod_set = templates.get(a.get("name")) or {}
            spec = (pod_set.get("template") or {}).get("spec") or {}
            total = pod_usage(spec, int(a.get("count") or pod_set.get("count") or 1))
        usage = add(usage, total)
    return usage


def gpus_of(
    workload: dict[str, Any] | None,
    pod_specs: list[tuple[int, dict[str, Any]]],
    shares_per_gpu: int | None,
) -> Gpus:
    """What Kueue admitted, else the pods' own resources (replicas x one pod's)."""
    usage = admitted_usage(workload) if workload else None
    if usage is None:
        usage = {}
        for times, spec in pod_specs:
            usage = add(usage, pod_usage(spec, times))
    return count_gpus(usage, shares_per_gpu)


def flavor(workload: dict[str, Any] | None) -> str:
    admission = (workload or {}).get("status", {}).get("admission") or {}
    for a in admission.get("podSetAssignments") or []:
        for resource, name in (a.get("flavors") or {}).items():
            if resource.startswith(GPU_PREFIXES) and name:
                return str(name)[:64]
    return ""


def evictions(workload: dict[str, Any]) -> tuple[int, str]:
    """How often Kueue evicted the workload, and why (``Preempted: 1``)."""
    status = workload.get("status", {})
    counted = [
        e
        for e in (status.get("schedulingStats") or {}).get("evictions") or []
        if isinstance(e, dict)
    ]
    total = sum(int(e.get("count") or 0) for e in counted)
    words = ", ".join(f"{e.get('reason')}: {e.get('count')}" for e in counted)
    requeued = int((status.get("requeueState") or {}).get("count") or 0)
    return (total, words) if total else (requeued, f"requeued: {requeued}" if requeued else "")


def past_seconds(workload: dict[str, Any]) -> int:
    status = workload.get("status", {})
    return next((int(status[k]) for k in PAST if isinstance(status.get(k), int)), 0)


def last_admitted(workload: dict[str, Any] | None) -> datetime | None:
    for kind in ("Admitted", "QuotaReserved"):
        found = condition(workload or {}, kind)
        if found is not None:
            return parse_time(found.get("lastTransitionTime"))
    return None


def split(
    mapped: Mapped, workload: dict[str, Any] | None, created: datetime | None
) -> list[Mapped]:
    """One finished attempt as its admissions: the earlier ones preempted attempts of the
    same retraining, each wait one share of the time not running before the last."""
    payload = mapped.payload
    admitted = last_admitted(workload)
    if payload is None or workload is None or created is None or admitted is None:
        return [mapped]
    count, why = evictions(workload)
    end = parse_time(payload.get("finished_at"))
    if end is None:  # an attempt still running (no end yet) is left whole
        return [mapped]
    laid = admissions(created, admitted, end, past_seconds(workload), count)
    shared = payload.get("gpu_hours")  # set for MIG slices and shares: scaled per attempt
    hours_of = (end - parse_time(payload["started_at"])).total_seconds() / 3600  # type: ignore[operator]
    retraining = payload.get("retraining_id") or payload["run_id"]
    found = []
    for number, a in enumerate(laid, start=1):
        p = {**payload, "scheduling_wait_hours": round(a.wait_hours, 6)}
        if a.evicted:
            p.update(run_id=f"{payload['run_id']}-admission-{number}", outcome="preempted")
            p.update(started_at=a.started.isoformat(), finished_at=a.finished.isoformat())
            p.update(interruptions=[], tags={**payload["tags"], "kueue_evictions": why[:200]})
            if shared:
                ran = (a.finished - a.started).total_seconds() / 3600
                p["gpu_hours"] = round(shared / hours_of * ran, 6)
        if len(laid) > 1:
            p["retraining_id"] = retraining
        found.append(replace(mapped, payload=p))
    return found


def by_owner(workloads: list[Any]) -> dict[str, dict[str, Any]]:
    """Workloads by the uid of the object Kueue made them for (any kind)."""
    found: dict[str, dict[str, Any]] = {}
    for w in workloads:
        if not isinstance(w, dict) or not isinstance(w.get("metadata"), dict):
            continue
        refs = [r for r in w["metadata"].get("ownerReferences") or [] if isinstance(r, dict)]
        uids = {str(r.get("uid")) for r in refs if r.get("uid")}
        uids.add(str((w["metadata"].get("labels") or {}).get("kueue.x-k8s.io/job-uid") or ""))
        for uid in uids - {""}:
            found.setdefault(uid, w)
    return found
