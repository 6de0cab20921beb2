"""``cadence import kubernetes``: batch/v1 Jobs and Kueue Workloads become attempts."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from cadence_client.commands.report import USAGE

from app.sources.enrich_command import fill_and_post, prometheus_args
from app.sources.kube_training import KINDS, map_training
from app.sources.kubernetes import Options, map_all
from app.sources.kubernetes_api import Forbidden, KubeError, KubeSource
from app.sources.posting import error, importer_args

JOB_POD_LABEL = "batch.kubernetes.io/job-name"


def add_parser(isub: Any) -> None:
    """Register ``import kubernetes`` on the ``cadence import`` subparsers."""
    p = isub.add_parser(
        "kubernetes",
        help="import finished Kubernetes training (Jobs, JobSet, TrainJob, PyTorchJob, MPIJob, "
        "RayJob; Kueue Workloads) as attempts",
        description="Each finished Job, JobSet, TrainJob, PyTorchJob, MPIJob or RayJob is one "
        "retraining, its uid the last attempt's run id (re-importing stores nothing twice); "
        "each earlier Kueue admission is a preempted attempt. GPUs from what Kueue admitted, "
        "else the pods' nvidia.com/gpu, MIG and amd.com/gpu limits; queue wait per admission. "
        "See docs/sources.md. Needs the kubernetes package: pip install 'cadence[kubernetes]'.",
    )
    p.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG, ~/.kube/config)")
    p.add_argument("--context", help="kubeconfig context (default: the current one)")
    p.add_argument("--namespace", help="default: the context's namespace, else every namespace")
    p.add_argument("--selector", help="label selector for the Jobs, e.g. team=ranking")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--pipeline", help="one Cadence pipeline for every Job")
    which.add_argument("--pipeline-label", help="the Job label that names its pipeline")
    p.add_argument(
        "--retraining-label",
        default="cadence.dev/retraining",
        help="Job label grouping attempts into one retraining (default: cadence.dev/retraining;"
        " else a CronJob's scheduled time)",
    )
    p.add_argument(
        "--shares-per-gpu",
        type=int,
        help="the time-slicing replicas of one GPU: each nvidia.com/gpu.shared is 1/N GPU",
    )
    prometheus_args(p, 'namespace="{k8s_namespace}", pod=~"{k8s_job}-.*"')
    importer_args(p)
    p.set_defaults(func=lambda _settings, args: run_import(args))


def run_import(args: argparse.Namespace, prometheus_transport: Any = None, **post: Any) -> int:
    try:
        source = KubeSource(args.kubeconfig, args.context, args.namespace)
        where = source.namespace or "every namespace"
        print(f"reading Jobs and training objects in {where} from {source.host}", file=sys.stderr)
        jobs, owners, pods, workloads = read_all(source, args.selector)
    except KubeError as exc:
        error(str(exc))
        return USAGE
    listed = sum(len(p) for p in pods.values())
    print(
        f"read {len(jobs)} Jobs, {len(owners)} training objects, {listed} Pods, "
        f"{len(workloads)} Kueue Workloads",
        file=sys.stderr,
    )
    options = Options(
        pipeline=args.pipeline,
        pipeline_label=args.pipeline_label,
        retraining_label=args.retraining_label,
        variant=args.variant,
        shares_per_gpu=args.shares_per_gpu,
    )
    mapped = map_all(jobs, pods.get(JOB_POD_LABEL, []), workloads, options)
    mapped += map_training(owners, pods, workloads, options)
    return fill_and_post(args, mapped, prometheus_transport, **post)


def read_all(source: KubeSource, selector: str | None) -> tuple[Any, Any, Any, Any]:
    """Jobs, the training objects of every kind the API serves, their pods (one list per
    kind, by the label its operator puts on them) and Kueue's Workloads."""
    jobs = source.jobs(selector)
    owners = []
    for kind in KINDS:
        try:
            owners += [(kind, o) for o in source.custom(kind.api, selector) or []]
        except Forbidden:  # RBAC without this kind: the others are still read
            group, _, plural = kind.api
            print(f"cannot list {plural}.{group} (403): skipped", file=sys.stderr)
    labels = {k.pod_label for k, _ in owners} | ({JOB_POD_LABEL} if jobs else set())
    pods = {label: source.pods(label) for label in sorted(labels)}
    workloads = source.workloads() if jobs or owners else []
    return jobs, owners, pods, workloads
