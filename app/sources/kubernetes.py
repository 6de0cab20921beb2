"""batch/v1 Jobs (with their Pods and Kueue Workloads) -> Cadence attempts. Pure.

Objects come as the API's JSON (camelCase). One Job is one attempt; its uid is the run
id, so re-imports store nothing twice.

- Window: ``status.startTime`` to ``status.completionTime`` (else the Failed
  condition's time). A Job with neither Complete nor Failed is not finished.
- Workers: the GPUs of one pod (``nvidia.com/gpu`` limits of its containers, from a pod
  of the Job, else the Job's template) times ``spec.parallelism``.
- Scheduling wait: creation to Kueue admission (the Workload's Admitted condition), else
  to the first pod's PodScheduled, else to ``status.startTime``.
- Outcome: Complete -> succeeded; Failed -> failed, or preempted when a pod of it was
  disrupted (DisruptionTarget, Evicted), or cancelled when its Workload was deactivated.
- Interruptions: each container restart, and each failed or evicted pod.
- Retraining: the ``--retraining-label`` value, else the owning CronJob and its
  scheduled time (``batch.kubernetes.io/cronjob-scheduled-timestamp``), else the Job.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from app.planning.gpu_shares import Gpus, ShareError
from app.sources.kueue import condition as _condition
from app.sources.kueue import gpus_of, split
from app.sources.kueue import parse_time as _time
from app.sources.posting import Mapped
from app.sources.posting import tags as clean_tags
from app.sources.slurm import hours, slug

GPU = "nvidia.com/gpu"
SCHEDULED = "batch.kubernetes.io/cronjob-scheduled-timestamp"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
DISRUPTED_REASONS = {"Evicted", "Preempting", "DeletionByTaintManager", "Terminated"}
MAX_INTERRUPTIONS = 1000


@dataclass(frozen=True)
class Options:
    pipeline: str | None = None
    pipeline_label: str | None = None
    retraining_label: str = "cadence.dev/retraining"
    variant: str = "baseline"
    shares_per_gpu: int | None = None  # time-slicing replicas of nvidia.com/gpu.shared


def shape_problem(obj: Any, kind: str) -> str | None:
    """Why an object is not a Kubernetes object this importer can read (a ``status``
    that is a list, say); None when its parts are objects where the API has objects."""
    if not isinstance(obj, dict):
        return f"the {kind} is {type(obj).__name__}, not an object"
    for part in ("metadata", "spec", "status"):
        if not isinstance(obj.get(part, {}), dict):
            return f"its {part} is {type(obj[part]).__name__}, not an object"
    for part in ("conditions", "containerStatuses"):
        if not isinstance(obj.get("status", {}).get(part) or [], list):
            return f"its status.{part} is not a list"
    return None


def owner_uid(obj: dict[str, Any]) -> str | None:
    if shape_problem(obj, "object") is not None:
        return None  # a malformed Pod or Workload belongs to no Job
    for ref in obj.get("metadata", {}).get("ownerReferences") or []:
        if isinstance(ref, dict) and ref.get("kind") == "Job":
            return str(ref.get("uid"))
    return None


def index_by_job(objects: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Pods or Workloads by the uid of the Job that owns them."""
    found: dict[str, list[dict[str, Any]]] = {}
    for obj in objects:
        uid = owner_uid(obj)
        if uid:
            found.setdefault(uid, []).append(obj)
    return found


def _disrupted(pod: dict[str, Any]) -> str | None:
    """Why a pod was taken away (preempted, evicted), or None."""
    target = _condition(pod, "DisruptionTarget")
    if target is not None:
        return str(target.get("reason") or "DisruptionTarget")
    reason = pod.get("status", {}).get("reason")
    return str(reason) if reason in DISRUPTED_REASONS else None


def interruptions(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for pod in pods:
        status = pod.get("status", {})
        restarts = sum(
            int(c.get("restartCount") or 0) for c in status.get("containerStatuses") or []
        )
        found += [{"cause": "container restart"}] * restarts
        why = _disrupted(pod)
        if why is not None:
            found.append({"cause": f"pod {why}"[:200]})
        elif status.get("phase") == "Failed":
            found.append({"cause": f"pod failed: {status.get('reason') or 'error'}"[:200]})
    return found[:MAX_INTERRUPTIONS]


def outcome(
    job: dict[str, Any], pods: list[dict[str, Any]], workloads: list[dict[str, Any]]
) -> str | None:
    if _condition(job, "Complete"):
        return "succeeded"
    if not _condition(job, "Failed"):
        return None
    if any(w.get("spec", {}).get("active") is False for w in workloads):
        return "cancelled"
    if any(_disrupted(p) for p in pods):
        return "preempted"
    return "failed"


def _queued_until(
    job: dict[str, Any], pods: list[dict[str, Any]], workloads: list[dict[str, Any]]
) -> datetime | None:
    for w in workloads:
        admitted = _condition(w, "Admitted")
        if admitted is not None:
            return _time(admitted.get("lastTransitionTime"))
    scheduled = [
        t
        for p in pods
        if (c := _condition(p, "PodScheduled")) and (t := _time(c.get("lastTransitionTime")))
    ]
    return min(scheduled) if scheduled else _time(job.get("status", {}).get("startTime"))


def retraining_id(job: dict[str, Any], options: Options) -> str | None:
    meta = job.get("metadata", {})
    label = (meta.get("labels") or {}).get(options.retraining_label)
    if label:
        return str(label)[:200]
    scheduled = (meta.get("annotations") or {}).get(SCHEDULED)
    for ref in meta.get("ownerReferences") or []:
        if ref.get("kind") == "CronJob" and scheduled:
            return f"{ref.get('name')}-{scheduled}"[:200]
    return None


def _gpu_type(job: dict[str, Any], workloads: list[dict[str, Any]]) -> str:
    for w in workloads:
        admission = w.get("status", {}).get("admission") or {}
        for assignment in admission.get("podSetAssignments") or []:
            flavor = (assignment.get("flavors") or {}).get(GPU)
            if flavor:
                return str(flavor)[:64]
    template = job.get("spec", {}).get("template", {}).get("spec", {})
    return str((template.get("nodeSelector") or {}).get("nvidia.com/gpu.product", ""))[:64]


def pipeline_of(job: dict[str, Any], options: Options) -> str:
    if options.pipeline:
        return options.pipeline
    labels = job.get("metadata", {}).get("labels") or {}
    return slug(str(labels.get(options.pipeline_label or "", "")))


def map_job(
    job: dict[str, Any],
    pods: list[dict[str, Any]],
    workloads: list[dict[str, Any]],
    options: Options,
) -> Mapped:
    meta, status = job.get("metadata", {}), job.get("status", {})
    where = f"Job {meta.get('namespace', '?')}/{meta.get('name', '?')}"
    uid = meta.get("uid")
    if not uid:
        return Mapped(where, reason="no metadata.uid")
    start = _time(status.get("startTime"))
    # An active Job that has started is a running attempt; the next import completes it.
    result = outcome(job, pods, workloads) or _running(job, start)
    if result is None:
        state = "suspended" if job.get("spec", {}).get("suspend") else "active"
        return Mapped(where, reason=f"not finished ({state}: no Complete or Failed condition)")
    failed = _condition(job, "Failed") or {}
    end = _time(status.get("completionTime")) or _time(failed.get("lastTransitionTime"))
    if result != "running" and (start is None or end is None or end <= start):
        return Mapped(where, reason=f"{result}, but no usable status.startTime/completionTime")
    if start is None:  # (never: checked above, and for a running Job by _running)
        return Mapped(where, reason="no status.startTime")
    try:
        gpus = _gpus(job, pods, workloads, options)
    except ShareError as exc:
        return Mapped(where, reason=str(exc))
    if gpus.devices < 1:
        return Mapped(where, reason=f"no {GPU} limit on its pods")
    pipeline = pipeline_of(job, options)
    if not pipeline:
        return Mapped(where, reason=f"no pipeline: label {options.pipeline_label!r} is missing")
    created = _time(meta.get("creationTimestamp"))
    queued = _queued_until(job, pods, workloads)
    payload: dict[str, Any] = {
        "pipeline": pipeline,
        "run_id": str(uid),
        "outcome": result,
        "variant": options.variant,
        "started_at": start.isoformat(),
        "workers": gpus.devices,
        "scheduling_wait_hours": round(hours(created, queued), 6) if created and queued else 0.0,
        "tags": _tags(job),
    }
    if end is not None and result != "running":  # a running Job's restarts come with its end
        payload.update(finished_at=end.isoformat(), interruptions=interruptions(pods))
        if gpus.share:  # MIG slices or time-sliced shares: priced as their fraction
            payload["gpu_hours"] = round(float(gpus.whole) * hours(start, end), 6)
    if gpus.share:
        payload["tags"]["gpu_share"] = gpus.share[:200]
    retraining = retraining_id(job, options)
    if retraining:
        payload["retraining_id"] = retraining
    gpu_type = _gpu_type(job, workloads)
    if gpu_type:
        payload["gpu_type"] = gpu_type
    return Mapped(where, payload)


def _gpus(
    job: dict[str, Any],
    pods: list[dict[str, Any]],
    workloads: list[dict[str, Any]],
    options: Options,
) -> Gpus:
    """What Kueue admitted, else one pod's (else the template's) GPUs x parallelism."""
    template = job.get("spec", {}).get("template", {}).get("spec", {})
    spec = pods[0].get("spec", {}) if pods else template
    parallelism = int(job.get("spec", {}).get("parallelism") or 1)
    held = workloads[0] if workloads else None
    return gpus_of(held, [(parallelism, spec)], options.shares_per_gpu)


def _running(job: dict[str, Any], start: datetime | None) -> str | None:
    """The outcome "running" for a Job that started, is not suspended and has active pods."""
    active = int(job.get("status", {}).get("active") or 0)
    if start is None or job.get("spec", {}).get("suspend") or active < 1:
        return None
    return "running"


def _tags(job: dict[str, Any]) -> dict[str, str]:
    meta = job.get("metadata", {})
    cronjob = next(
        (r.get("name") for r in meta.get("ownerReferences") or [] if r.get("kind") == "CronJob"),
        None,
    )
    tags = {
        "k8s_namespace": meta.get("namespace"),
        "k8s_job": meta.get("name"),
        "k8s_cronjob": cronjob,
        "kueue_queue": (meta.get("labels") or {}).get(QUEUE_LABEL),
    }
    return clean_tags(tags)


def map_all(
    jobs: list[dict[str, Any]],
    pods: list[dict[str, Any]],
    workloads: list[dict[str, Any]],
    options: Options,
) -> list[Mapped]:
    pods_of, workloads_of = index_by_job(pods), index_by_job(workloads)
    found: list[Mapped] = []
    for job in jobs:
        mapped = _map_checked(job, pods_of, workloads_of, options)
        meta = job.get("metadata", {}) if isinstance(job, dict) else {}
        if _part_of(meta):  # a JobSet's or RayJob's Job: imported with its owner
            continue
        held = workloads_of.get(str(meta.get("uid")), [])
        created = _time(meta.get("creationTimestamp"))
        found += (
            split(mapped, held[0] if held else None, created) if not mapped.invalid else [mapped]
        )
    return found


# Kinds read on their own (app/sources/kube_training.py): their Jobs are part of them.
TRAINING_OWNERS = {"JobSet", "TrainJob", "PyTorchJob", "MPIJob", "RayJob"}


def _part_of(meta: Any) -> bool:
    refs = meta.get("ownerReferences") if isinstance(meta, dict) else None
    return any(isinstance(r, dict) and r.get("kind") in TRAINING_OWNERS for r in refs or [])


def _map_checked(
    job: Any,
    pods_of: dict[str, list[dict[str, Any]]],
    workloads_of: dict[str, list[dict[str, Any]]],
    options: Options,
) -> Mapped:
    """A Job of the wrong shape refuses the import, named (never a traceback)."""
    problem = shape_problem(job, "Job")
    meta = job.get("metadata") if isinstance(job, dict) else None
    meta = meta if isinstance(meta, dict) else {}
    where = f"Job {meta.get('namespace', '?')}/{meta.get('name', '?')}"
    if problem is not None:
        return Mapped(where, reason=f"malformed: {problem}", invalid=True)
    uid = str(meta.get("uid"))
    try:
        return map_job(job, pods_of.get(uid, []), workloads_of.get(uid, []), options)
    except (AttributeError, TypeError, ValueError, KeyError) as exc:
        return Mapped(where, reason=f"malformed: {type(exc).__name__}: {exc}", invalid=True)
