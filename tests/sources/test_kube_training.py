"""``cadence import kubernetes`` for training objects under Kueue: JobSet, TrainJob,
PyTorchJob, MPIJob, RayJob and a batch/v1 Job, each preempted once, through the real
``kubernetes`` client against a loopback API. Every object it serves is first validated
against its upstream CRD's openAPIV3Schema (tests/fixtures/kubernetes/crds, README)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import jsonschema_rs
import pytest

from app import cli
from app.planning.imports import totals
from app.sources import kubernetes_command
from app.sources.kube_training import KINDS, map_training
from app.sources.kubernetes import Options, map_all
from app.sources.posting import attempt_of
from tests.fixtures.kube_api import JsonApiHandler, serving

if os.environ.get("CI") != "true":
    pytest.importorskip("kubernetes", reason="KUBERNETES TESTS NOT RUN: pip install kubernetes")

CRDS = Path(__file__).parents[1] / "fixtures" / "kubernetes" / "crds"
DAY = "2026-11-10T"
GPU8 = {"limits": {"nvidia.com/gpu": "4"}}  # 4 per pod, 2 pods: 8 GPUs


def schema(crd: str, version: str) -> Any:
    found = json.loads((CRDS / f"{crd}.json").read_text())
    return next(v for v in found["spec"]["versions"] if v["name"] == version)["schema"][
        "openAPIV3Schema"
    ]


def meta(name: str, uid: str, **more: Any) -> dict[str, Any]:
    labels = {"cadence.dev/pipeline": "ranker", "kueue.x-k8s.io/queue-name": "team-a"}
    return {"name": name, "namespace": "ml", "uid": uid, "creationTimestamp": f"{DAY}00:00:00Z",
            "labels": labels, **more}  # fmt: skip


def pod_spec(resources: dict[str, Any] | None = None) -> dict[str, Any]:
    container = {"name": "trainer", "image": "registry.test/train:1"}
    return {"containers": [{**container, "resources": resources or {}}], "restartPolicy": "Never"}


def cond(kind: str, reason: str, at: str, status: str = "True") -> dict[str, Any]:
    return {"type": kind, "status": status, "reason": reason, "message": reason,
            "lastTransitionTime": f"{DAY}{at}Z"}  # fmt: skip


def owners() -> dict[str, dict[str, Any]]:
    """One of each kind: created 00:00, last admitted 03:00, finished 05:00, 8 GPUs."""
    done = {"startTime": f"{DAY}03:00:00Z", "completionTime": f"{DAY}05:00:00Z"}
    replica = {"replicas": 1, "template": {"spec": pod_spec(GPU8)}}
    job_template = {"spec": {"parallelism": 1, "template": {"spec": pod_spec(GPU8)}}}
    ray_group = {"groupName": "gpu", "replicas": 2, "minReplicas": 2, "maxReplicas": 2,
                 "rayStartParams": {}, "template": {"spec": pod_spec(GPU8)}}  # fmt: skip
    return {
        "JobSet": {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
            "metadata": meta("rank-js", "u-jobset"),
            "spec": {"replicatedJobs": [{"name": "w", "replicas": 2, "template": job_template}]},
            "status": {"terminalState": "Completed",
                       "conditions": [cond("Completed", "AllJobsCompleted", "05:00:00")]}},
        "TrainJob": {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
            "metadata": meta("rank-tj", "u-trainjob"),
            "spec": {"runtimeRef": {"name": "torch-distributed"},
                     "trainer": {"numNodes": 2, "resourcesPerNode": GPU8}},
            "status": {"conditions": [cond("Complete", "JobsCompleted", "05:00:00")]}},
        "PyTorchJob": {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
            "metadata": meta("rank-pt", "u-pytorchjob"),
            "spec": {"pytorchReplicaSpecs": {"Master": replica, "Worker": replica}},
            "status": {**done,
                       "conditions": [cond("Succeeded", "PyTorchJobSucceeded", "05:00:00")]}},
        "MPIJob": {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob",
            "metadata": meta("rank-mpi", "u-mpijob"),
            "spec": {"mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": {"spec": pod_spec()}},
                "Worker": {**replica, "replicas": 2}}},
            "status": {**done, "conditions": [cond("Succeeded", "MPIJobSucceeded", "05:00:00")]}},
        "RayJob": {"apiVersion": "ray.io/v1", "kind": "RayJob",
            "metadata": meta("rank-ray", "u-rayjob"),
            "spec": {"entrypoint": "python train.py",
                     "rayClusterSpec": {"headGroupSpec": {"rayStartParams": {},
                                                          "template": {"spec": pod_spec()}},
                                        "workerGroupSpecs": [ray_group]}},
            "status": {"jobStatus": "SUCCEEDED", "jobDeploymentStatus": "Complete",
                       "rayClusterName": "rank-ray-raycluster-x1", "startTime": f"{DAY}03:00:00Z",
                       "endTime": f"{DAY}05:00:00Z"}},
    }  # fmt: skip


def workload(owner: dict[str, Any], version: str = "v1beta2") -> dict[str, Any]:
    """Kueue's record: admitted again at 03:00 after 7200 s running and one preemption."""
    ref = {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "controller": True,
           "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"]}  # fmt: skip
    past = (
        "accumulatedPastExecutionTimeSeconds"
        if version == "v1beta2"
        else ("accumulatedPastExexcutionTimeSeconds")
    )  # v1beta1's own spelling
    assignment = {"name": "main", "count": 2, "flavors": {"nvidia.com/gpu": "a100-80gb"},
                  "resourceUsage": {"nvidia.com/gpu": "8"}}  # fmt: skip
    return {
        "apiVersion": f"kueue.x-k8s.io/{version}", "kind": "Workload",
        "metadata": {"name": f"wl-{ref['name']}", "namespace": "ml", "uid": f"wl-{ref['uid']}",
                     "creationTimestamp": f"{DAY}00:00:00Z", "ownerReferences": [ref]},
        "spec": {"queueName": "team-a",
                 "podSets": [{"name": "main", "count": 2, "template": {"spec": pod_spec(GPU8)}}]},
        "status": {
            "admission": {"clusterQueue": "gpu", "podSetAssignments": [assignment]},
            "conditions": [cond("QuotaReserved", "QuotaReserved", "03:00:00"),
                           cond("Admitted", "Admitted", "03:00:00"),
                           cond("Evicted", "QuotaReserved", "03:00:00", status="False"),
                           cond("Finished", "Succeeded", "05:00:00")],
            past: 7200,
            "requeueState": {"count": 1},
            "schedulingStats": {"evictions": [
                {"reason": "Preempted", "underlyingCause": "InClusterQueue", "count": 1}]},
        },
    }  # fmt: skip


def batch_job() -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta("rank-job", "u-job"),
            "spec": {"parallelism": 2, "template": {"spec": pod_spec(GPU8)}},
            "status": {"startTime": f"{DAY}03:00:00Z", "completionTime": f"{DAY}05:00:00Z",
                       "conditions": [cond("Complete", "CompletionsReached", "05:00:00")]},
            }  # fmt: skip


CRD_OF = {"JobSet": ("jobset.x-k8s.io_jobsets", "v1alpha2"),
          "TrainJob": ("trainer.kubeflow.org_trainjobs", "v1alpha1"),
          "PyTorchJob": ("kubeflow.org_pytorchjobs", "v1"),
          "MPIJob": ("kubeflow.org_mpijobs", "v2beta1"),
          "RayJob": ("ray.io_rayjobs", "v1")}  # fmt: skip


def test_every_served_object_is_one_its_crd_admits() -> None:
    for kind, owner in owners().items():
        jsonschema_rs.validate(schema(*CRD_OF[kind]), owner)
        for version in ("v1beta2", "v1beta1"):
            jsonschema_rs.validate(
                schema("kueue.x-k8s.io_workloads", version), workload(owner, version)
            )
    # The check can fail: a Workload without its pod sets' templates is refused.
    broken = workload(owners()["JobSet"])
    del broken["spec"]["podSets"][0]["template"]
    assert not jsonschema_rs.is_valid(schema("kueue.x-k8s.io_workloads", "v1beta2"), broken)


def check_preempted_once(mapped: list[Any]) -> None:
    """DOMAIN.md section 2: 2 h on 8 GPUs, preempted, 2 h more: 32 GPU-h, 1 h wait."""
    assert [m.reason for m in mapped if m.payload is None] == []
    runs = [m.payload for m in mapped]
    assert [r["outcome"] for r in runs] == ["preempted", "succeeded"]
    assert runs[0]["run_id"] == f"{runs[1]['run_id']}-admission-1"
    assert runs[0]["retraining_id"] == runs[1]["retraining_id"]
    # wait: 3 h before the last admission, 2 h of it running: 1 h, 0.5 h per admission.
    assert [(r["started_at"][11:16], r["finished_at"][11:16]) for r in runs] == [
        ("00:30", "02:30"), ("03:00", "05:00")]  # fmt: skip
    assert sum(r["scheduling_wait_hours"] for r in runs) == pytest.approx(1.0)
    row = totals([attempt_of(r) for r in runs])["ranker"]
    assert (row.gpu_hours, row.attempts) == (pytest.approx(32.0), 2)  # 8 x 2 + 8 x 2
    assert runs[0]["tags"]["kueue_evictions"] == "Preempted: 1"


@pytest.mark.parametrize("kind", sorted(CRD_OF))
@pytest.mark.parametrize("version", ["v1beta2", "v1beta1"])
def test_each_kind_preempted_once_reads_32_gpu_hours(kind: str, version: str) -> None:
    owner = owners()[kind]
    chosen = next(k for k in KINDS if k.name == kind)
    options = Options(pipeline_label="cadence.dev/pipeline")
    # No pods: they are gone after the run; the Workload and the owner's status suffice.
    mapped = map_training([(chosen, owner)], {}, [workload(owner, version)], options)
    check_preempted_once(mapped)
    assert mapped[1].payload["gpu_type"] == "a100-80gb"


def test_batch_job_preempted_once_reads_32_gpu_hours() -> None:
    job = batch_job()
    options = Options(pipeline_label="cadence.dev/pipeline")
    check_preempted_once(map_all([job], [], [workload(job)], options))
    # A JobSet's own Jobs are imported with the JobSet, not again on their own.
    child = {**job, "metadata": {**job["metadata"], "uid": "u-child", "ownerReferences": [
        {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "name": "rank-js",
         "uid": "u-jobset", "controller": True}]}}  # fmt: skip
    assert map_all([child], [], [], options) == []


@pytest.mark.parametrize("kind", sorted(CRD_OF))
def test_without_kueue_the_templates_give_the_gpus(kind: str) -> None:
    owner = owners()[kind]
    if kind in ("JobSet", "TrainJob"):  # their status holds no start: a pod's is used
        pods = [{"metadata": {"namespace": "ml", "labels": {}}, "spec": pod_spec(GPU8),
                 "status": {"startTime": f"{DAY}03:00:00Z"}}] * 2  # fmt: skip
        chosen = next(k for k in KINDS if k.name == kind)
        for p in pods:
            p["metadata"]["labels"][chosen.pod_label] = owner["metadata"]["name"]
        listed = {chosen.pod_label: pods}
    else:
        listed = {}
    chosen = next(k for k in KINDS if k.name == kind)
    [m] = map_training([(chosen, owner)], listed, [], Options(pipeline="ranker"))
    assert m.payload is not None, m.reason
    # 2 pods x 4 GPUs (the MPI launcher and the Ray head ask for none), 03:00-05:00.
    assert (m.payload["workers"], m.payload["outcome"]) == (8, "succeeded")
    assert totals([attempt_of(m.payload)])["ranker"].gpu_hours == pytest.approx(16.0)


def test_mig_slices_are_priced_as_their_fraction_and_said_so() -> None:
    owner = owners()["PyTorchJob"]
    mig = {"limits": {"nvidia.com/mig-1g.10gb": "1"}}
    for role in owner["spec"]["pytorchReplicaSpecs"].values():
        role["template"]["spec"] = pod_spec(mig)
    jsonschema_rs.validate(schema(*CRD_OF["PyTorchJob"]), owner)
    [m] = map_training([(KINDS[2], owner)], {}, [], Options(pipeline="ranker"))
    # 2 slices of 1/7 for 2 h: 2 x 2 / 7 = 0.571429 GPU-hours, 2 workers (slices).
    assert m.payload["workers"] == 2
    assert m.payload["gpu_hours"] == pytest.approx(4 / 7, abs=1e-6)
    assert m.payload["tags"]["gpu_share"] == "2 x mig-1g.10gb = 1/7 GPU each"


def test_time_sliced_shares_need_the_replicas() -> None:
    owner = owners()["MPIJob"]
    owner["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"] = pod_spec(
        {"limits": {"nvidia.com/gpu.shared": "1"}}
    )
    [m] = map_training([(KINDS[3], owner)], {}, [], Options(pipeline="ranker"))
    assert m.payload is None and "--shares-per-gpu" in m.reason
    [m] = map_training([(KINDS[3], owner)], {}, [], Options(pipeline="ranker", shares_per_gpu=4))
    # 2 workers x 1 share of 1/4 GPU for 2 h: 2 x 0.25 x 2 = 1.0 GPU-hour.
    assert m.payload["gpu_hours"] == pytest.approx(1.0)
    assert m.payload["tags"]["gpu_share"] == "2 x gpu.shared = 1/4 GPU each"


@pytest.fixture(scope="module")
def api() -> Iterator[str]:
    """A loopback API serving the validated objects; v1beta1 Workloads are not served,
    v1beta2 are; pods are answered by label-existence selectors."""
    served = owners()
    routes = {
        f"/apis/{k.api[0]}/{k.api[1]}/namespaces/ml/{k.api[2]}": [served[k.name]] for k in KINDS
    }
    routes["/apis/batch/v1/namespaces/ml/jobs"] = [batch_job()]
    routes["/apis/kueue.x-k8s.io/v1beta2/namespaces/ml/workloads"] = [
        workload(o) for o in [*served.values(), batch_job()]]  # fmt: skip
    ray_pod = {"metadata": {"name": "rank-ray-worker-1", "namespace": "ml",
                            "labels": {"ray.io/cluster": "rank-ray-raycluster-x1"}},
               "spec": pod_spec(GPU8), "status": {"phase": "Succeeded",
               "containerStatuses": [{"name": "trainer", "restartCount": 1}]}}  # fmt: skip
    routes["/api/v1/namespaces/ml/pods"] = [ray_pod]
    asked: list[str] = []

    class Handler(JsonApiHandler):
        def do_GET(self) -> None:
            url = urlparse(self.path)
            selector = parse_qs(url.query).get("labelSelector", [""])[0]
            asked.append(f"{url.path}?{selector}")
            if url.path not in routes:
                return self._send(404, {"kind": "Status", "code": 404, "reason": "NotFound"})
            found = [
                o for o in routes[url.path] if not selector or selector in o["metadata"]["labels"]
            ]
            return self._send(200, {"kind": "List", "metadata": {}, "items": found})

    with serving(Handler) as url:
        yield url


def test_dry_run_reads_every_kind_through_the_client(
    api: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "kubeconfig"
    config.write_text(
        "apiVersion: v1\nkind: Config\n"
        f"clusters:\n- name: stub\n  cluster: {{server: '{api}'}}\n"
        "users:\n- name: importer\n  user: {token: t}\n"
        "contexts:\n- name: stub\n  context: {cluster: stub, user: importer, namespace: ml}\n"
        "current-context: stub\n"
    )
    flags = ["--kubeconfig", str(config), "--url", "http://testserver"]
    argv = cli.parser().parse_args(
        ["import", "kubernetes", *flags, "--pipeline-label", "cadence.dev/pipeline", "--dry-run"]
    )
    code = kubernetes_command.run_import(argv)
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "read 1 Jobs, 5 training objects, 1 Pods, 6 Kueue Workloads" in err
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines()[1:]}
    # PIPELINE RETRAININGS ATTEMPTS OK FAILED PREEMPT CANCEL GPU-HOURS NO-UTIL
    # six objects, each 2 attempts of 8 GPUs x 2 h: 6 x 32 = 192 GPU-hours.
    assert rows["ranker"][:7] == ["6", "12", "6", "0", "6", "0", "192.00"]


def test_mig_slices_preempted_once_scale_each_attempt() -> None:
    owner = owners()["PyTorchJob"]
    held = workload(owner)
    assignment = held["status"]["admission"]["podSetAssignments"][0]
    assignment["resourceUsage"] = {"nvidia.com/mig-3g.40gb": "2"}
    assignment["flavors"] = {"nvidia.com/mig-3g.40gb": "a100-80gb-mig"}
    jsonschema_rs.validate(schema("kueue.x-k8s.io_workloads", "v1beta2"), held)
    mapped = map_training([(KINDS[2], owner)], {}, [held], Options(pipeline="ranker"))
    # 2 slices of 3/7 = 6/7 GPU; 2 h each attempt: 12/7 GPU-h each, 24/7 = 3.428571 in all.
    assert [m.payload["gpu_hours"] for m in mapped] == pytest.approx([12 / 7, 12 / 7], abs=1e-5)
    assert [m.payload["workers"] for m in mapped] == [2, 2]
    assert mapped[0].payload["tags"]["gpu_share"] == "2 x mig-3g.40gb = 3/7 GPU each"


def test_a_kind_the_credentials_may_not_list_is_skipped_and_said(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from app.sources.kubernetes_api import Forbidden

    class Source:  # jobs listed; RayJobs forbidden (403); the other kinds not served
        def jobs(self, _selector: Any) -> list[Any]:
            return [batch_job()]

        def custom(self, api: tuple[str, str, str], _selector: Any) -> Any:
            if api[2] == "rayjobs":
                raise Forbidden("403")
            return None

        def pods(self, _label: str) -> list[Any]:
            return []

        def workloads(self) -> list[Any]:
            return []

    jobs, owners, _pods, _workloads = kubernetes_command.read_all(Source(), None)  # type: ignore[arg-type]
    assert (len(jobs), owners) == (1, [])
    assert "cannot list rayjobs.ray.io (403): skipped" in capsys.readouterr().err
