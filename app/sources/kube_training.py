"""Distributed training objects -> Cadence attempts: JobSet, Kubeflow Trainer TrainJob,
the older Kubeflow PyTorchJob, MPIJob (mpi-operator v2beta1) and KubeRay RayJob. Pure.

One object is one retraining; its uid is the last attempt's run id. Its Kueue Workload
(``app.sources.kueue``) gives the GPUs admitted and the earlier admissions (preempted
attempts); without Kueue, the pods' (else the templates') GPUs times their replicas.

- Finished: JobSet ``Completed``/``Failed``; TrainJob ``Complete``/``Failed``;
  PyTorchJob and MPIJob ``Succeeded``/``Failed`` (``status.completionTime``); RayJob
  ``status.jobStatus`` SUCCEEDED/FAILED/STOPPED (``status.endTime``); else the
  Workload's ``Finished`` condition, so an object whose pods are gone still imports.
- Start: the last Kueue admission, else ``status.startTime``, else the first pod's.
- Pods: listed by the label each operator puts on them (``pod_selector``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from app.planning.gpu_shares import ShareError
from app.sources.kubernetes import (
    Options,
    interruptions,
    pipeline_of,
    retraining_id,
    shape_problem,
)
from app.sources.kueue import (
    by_owner,
    condition,
    flavor,
    gpus_of,
    last_admitted,
    parse_time,
    split,
)
from app.sources.posting import Mapped
from app.sources.posting import tags as clean_tags
from app.sources.slurm import hours

Specs = list[tuple[int, dict[str, Any]]]
Ending = tuple[str | None, datetime | None]


def _template(obj: Any) -> dict[str, Any]:
    return dict(((obj or {}).get("template") or {}).get("spec") or {})


def _replica_specs(field: str) -> Callable[[dict[str, Any]], Specs]:
    def specs(owner: dict[str, Any]) -> Specs:
        roles = owner.get("spec", {}).get(field) or {}
        return [(int(r.get("replicas") or 1), _template(r)) for r in roles.values()]

    return specs


def _jobset_specs(owner: dict[str, Any]) -> Specs:
    found = []
    for rj in owner.get("spec", {}).get("replicatedJobs") or []:
        job = (rj.get("template") or {}).get("spec") or {}
        found.append(
            (int(rj.get("replicas") or 1) * int(job.get("parallelism") or 1), _template(job))
        )
    return found


def _trainjob_specs(owner: dict[str, Any]) -> Specs:
    trainer = owner.get("spec", {}).get("trainer") or {}
    pod = {"containers": [{"resources": trainer.get("resourcesPerNode") or {}}]}
    return [(int(trainer.get("numNodes") or 1), pod)]


def _rayjob_specs(owner: dict[str, Any]) -> Specs:
    cluster = owner.get("spec", {}).get("rayClusterSpec") or {}
    found = [(1, _template(cluster.get("headGroupSpec")))]
    for group in cluster.get("workerGroupSpecs") or []:
        times = int(group.get("replicas") or 0) * int(group.get("numOfHosts") or 1)
        found.append((times, _template(group)))
    return found


def _by_conditions(done: str, failed: str, end_field: str = "") -> Callable[..., Ending]:
    def ending(owner: dict[str, Any]) -> Ending:
        for kind, outcome in ((done, "succeeded"), (failed, "failed")):
            found = condition(owner, kind)
            if found is not None:
                end = parse_time(owner.get("status", {}).get(end_field)) if end_field else None
                return outcome, end or parse_time(found.get("lastTransitionTime"))
        return None, None

    return ending


RAY_OUTCOMES = {"SUCCEEDED": "succeeded", "FAILED": "failed", "STOPPED": "cancelled"}


def _rayjob_ending(owner: dict[str, Any]) -> Ending:
    status = owner.get("status", {})
    outcome = RAY_OUTCOMES.get(str(status.get("jobStatus")))
    if outcome is None and status.get("jobDeploymentStatus") == "Failed":
        outcome = "failed"  # the submitter or the cluster failed before the job ran
    return outcome, parse_time(status.get("endTime")) if outcome else None


@dataclass(frozen=True)
class Kind:
    name: str
    api: tuple[str, str, str]  # group, version, plural
    pod_label: str  # the label the operator puts on the object's pods
    pod_specs: Callable[[dict[str, Any]], Specs]
    ending: Callable[[dict[str, Any]], Ending]

    def pod_selector(self, owner: dict[str, Any]) -> str:
        name = owner.get("metadata", {}).get("name", "")
        if self.name == "RayJob":  # its pods belong to the RayCluster it made
            name = owner.get("status", {}).get("rayClusterName") or name
        return f"{self.pod_label}={name}"


KUBEFLOW_JOB = "training.kubeflow.org/job-name"
KINDS = (
    Kind(
        "JobSet",
        ("jobset.x-k8s.io", "v1alpha2", "jobsets"),
        "jobset.sigs.k8s.io/jobset-name",
        _jobset_specs,
        _by_conditions("Completed", "Failed"),
    ),
    # A TrainJob runs as a JobSet of the same name: its pods carry the JobSet's label.
    Kind(
        "TrainJob",
        ("trainer.kubeflow.org", "v1alpha1", "trainjobs"),
        "jobset.sigs.k8s.io/jobset-name",
        _trainjob_specs,
        _by_conditions("Complete", "Failed"),
    ),
    Kind(
        "PyTorchJob",
        ("kubeflow.org", "v1", "pytorchjobs"),
        KUBEFLOW_JOB,
        _replica_specs("pytorchReplicaSpecs"),
        _by_conditions("Succeeded", "Failed", "completionTime"),
    ),
    Kind(
        "MPIJob",
        ("kubeflow.org", "v2beta1", "mpijobs"),
        KUBEFLOW_JOB,
        _replica_specs("mpiReplicaSpecs"),
        _by_conditions("Succeeded", "Failed", "completionTime"),
    ),
    Kind("RayJob", ("ray.io", "v1", "rayjobs"), "ray.io/cluster", _rayjob_specs, _rayjob_ending),
)


def _ending(kind: Kind, owner: dict[str, Any], workload: dict[str, Any] | None) -> Ending:
    outcome, end = kind.ending(owner)
    if outcome is None and workload is not None:
        finished = condition(workload, "Finished")  # the owner's status may be gone too
        if finished is not None:
            outcome = "succeeded" if finished.get("reason") == "Succeeded" else "failed"
            end = parse_time(finished.get("lastTransitionTime"))
    if outcome and workload and workload.get("spec", {}).get("active") is False:
        outcome = "cancelled"  # deactivated: someone stopped it
    return outcome, end


def _start(owner: dict[str, Any], pods: list[dict[str, Any]], workload: Any) -> datetime | None:
    started = [t for p in pods if (t := parse_time(p.get("status", {}).get("startTime")))]
    return (
        last_admitted(workload)
        or parse_time(owner.get("status", {}).get("startTime"))
        or (min(started) if started else None)
    )


def map_owner(
    kind: Kind,
    owner: dict[str, Any],
    pods: list[dict[str, Any]],
    workload: dict[str, Any] | None,
    options: Options,
) -> list[Mapped]:
    meta = owner.get("metadata", {})
    where = f"{kind.name} {meta.get('namespace', '?')}/{meta.get('name', '?')}"
    outcome, end = _ending(kind, owner, workload)
    if not meta.get("uid"):
        return [Mapped(where, reason="no metadata.uid")]
    if outcome is None:
        return [Mapped(where, reason="not finished (no terminal condition or status)")]
    start = _start(owner, pods, workload)
    if start is None or end is None or end <= start:
        return [Mapped(where, reason=f"{outcome}, but no usable start and end times")]
    specs = [(1, p.get("spec") or {}) for p in pods] or kind.pod_specs(owner)
    try:
        gpus = gpus_of(workload, specs, options.shares_per_gpu)
    except ShareError as exc:
        return [Mapped(where, reason=str(exc))]
    if gpus.devices < 1:
        return [Mapped(where, reason="no GPU (nvidia.com/gpu, MIG, amd.com/gpu) requested")]
    pipeline = pipeline_of(owner, options)
    if not pipeline:
        return [Mapped(where, reason=f"no pipeline: label {options.pipeline_label!r} is missing")]
    payload = _payload(kind, owner, (start, end), outcome, options)
    payload.update(pipeline=pipeline, workers=gpus.devices, interruptions=interruptions(pods))
    if gpus.share:
        payload["gpu_hours"] = round(float(gpus.whole) * hours(start, end), 6)
        payload["tags"]["gpu_share"] = gpus.share[:200]
    gpu_type = flavor(workload)
    if gpu_type:
        payload["gpu_type"] = gpu_type
    created = parse_time(meta.get("creationTimestamp"))
    return split(Mapped(where, payload), workload, created)


def _payload(
    kind: Kind,
    owner: dict[str, Any],
    window: tuple[datetime, datetime],
    outcome: str,
    options: Options,
) -> dict[str, Any]:
    meta = owner.get("metadata", {})
    created = parse_time(meta.get("creationTimestamp"))
    payload: dict[str, Any] = {
        "run_id": str(meta["uid"]),
        "outcome": outcome,
        "variant": options.variant,
        "started_at": window[0].isoformat(),
        "finished_at": window[1].isoformat(),
        "scheduling_wait_hours": round(hours(created, window[0]), 6) if created else 0.0,
        "tags": clean_tags(
            {
                "k8s_namespace": meta.get("namespace"),
                "k8s_kind": kind.name,
                "k8s_name": meta.get("name"),
                # Its pods' names start with it, as a Job's do: the default --match.
                "k8s_job": meta.get("name"),
                "kueue_queue": (meta.get("labels") or {}).get("kueue.x-k8s.io/queue-name"),
            }
        ),
    }
    retraining = retraining_id(owner, options)
    if retraining:
        payload["retraining_id"] = retraining
    return payload


def pods_by_label(pods: list[Any], label: str) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """Pods by (namespace, the value of one label): how each operator names its pods."""
    found: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for pod in pods:
        meta = pod.get("metadata") if isinstance(pod, dict) else None
        value = ((meta or {}).get("labels") or {}).get(label) if isinstance(meta, dict) else None
        if value:
            found.setdefault((str(meta.get("namespace")), str(value)), []).append(pod)  # type: ignore[union-attr]
    return found


def map_training(
    owners: list[tuple[Kind, Any]],
    pods: dict[str, list[Any]],
    workloads: list[Any],
    options: Options,
) -> list[Mapped]:
    """Every training object as its attempts; ``pods`` by the label of each kind."""
    held = by_owner(workloads)
    indexes = {label: pods_by_label(listed, label) for label, listed in pods.items()}
    found: list[Mapped] = []
    for kind, owner in owners:
        problem = shape_problem(owner, kind.name)
        meta = owner.get("metadata") if isinstance(owner, dict) else None
        meta = meta if isinstance(meta, dict) else {}
        where = f"{kind.name} {meta.get('namespace', '?')}/{meta.get('name', '?')}"
        if problem is not None:
            found.append(Mapped(where, reason=f"malformed: {problem}", invalid=True))
            continue
        label = kind.pod_selector(owner).partition("=")[2]
        own = indexes.get(kind.pod_label, {}).get((str(meta.get("namespace")), label), [])
        try:
            found += map_owner(kind, owner, own, held.get(str(meta.get("uid"))), options)
        except (AttributeError, TypeError, ValueError, KeyError) as exc:
            found.append(
                Mapped(where, reason=f"malformed: {type(exc).__name__}: {exc}", invalid=True)
            )
    return found
