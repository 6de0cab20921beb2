"""``cadence import kubernetes``: batch/v1 Jobs and Kueue Workloads become attempts."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from cadence_client.commands.report import USAGE

from app.sources.enrich_command import fill_and_post, prometheus_args
from app.sources.kubernetes import Options, map_all
from app.sources.kubernetes_api import KubeError, KubeSource
from app.sources.posting import error, importer_args


def add_parser(isub: Any) -> None:
    """Register ``import kubernetes`` on the ``cadence import`` subparsers."""
    p = isub.add_parser(
        "kubernetes",
        help="import finished Kubernetes Jobs (and Kueue Workloads) as attempts",
        description="Each finished Job is one attempt, its uid the run id (re-importing "
        "stores nothing twice): window from its status, GPUs from its pods' nvidia.com/gpu "
        "limits, queue wait from creation to Kueue admission or PodScheduled, outcome "
        "from its conditions. Needs the kubernetes package: pip install 'cadence[kubernetes]'.",
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
    prometheus_args(p, 'namespace="{k8s_namespace}", pod=~"{k8s_job}-.*"')
    importer_args(p)
    p.set_defaults(func=lambda _settings, args: run_import(args))


def run_import(args: argparse.Namespace, prometheus_transport: Any = None, **post: Any) -> int:
    try:
        source = KubeSource(args.kubeconfig, args.context, args.namespace)
        where = source.namespace or "every namespace"
        print(f"reading Jobs in {where} from {source.host}", file=sys.stderr)
        jobs = source.jobs(args.selector)
        pods, workloads = (source.pods(), source.workloads()) if jobs else ([], [])
    except KubeError as exc:
        error(str(exc))
        return USAGE
    print(
        f"read {len(jobs)} Jobs, {len(pods)} Pods, {len(workloads)} Kueue Workloads",
        file=sys.stderr,
    )
    options = Options(
        pipeline=args.pipeline,
        pipeline_label=args.pipeline_label,
        retraining_label=args.retraining_label,
        variant=args.variant,
    )
    mapped = map_all(jobs, pods, workloads, options)
    return fill_and_post(args, mapped, prometheus_transport, **post)
