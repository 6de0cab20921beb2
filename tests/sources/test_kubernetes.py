"""``cadence import kubernetes``: the real ``kubernetes`` client, through a kubeconfig,
against a loopback stub API server answering the Job, Pod and Workload JSON of
tests/fixtures/kubernetes (see its README for how it was written), paged."""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import httpx
import pytest
from fastapi.testclient import TestClient

from app import cli
from app.db.engine import Database
from app.planning.imports import totals
from app.sources import kubernetes_command
from app.sources.kubernetes import Options, map_all
from app.sources.posting import attempt_of
from tests.fixtures.builders import make_token
from tests.fixtures.client import through
from tests.fixtures.kube_api import JsonApiHandler, serving
from tests.fixtures.serving import free_port

if os.environ.get("CI") != "true":  # in CI the dev dependency must be there: no skip
    pytest.importorskip("kubernetes", reason="KUBERNETES TESTS NOT RUN: pip install kubernetes")

FIXTURES = Path(__file__).parents[1] / "fixtures" / "kubernetes"
TOKEN = "stub-cluster-token"
A = "0a1b2c3d-0000-4000-8000-00000000000a"
B = "0a1b2c3d-0000-4000-8000-00000000000b"
C = "0a1b2c3d-0000-4000-8000-00000000000c"
F = "0a1b2c3d-0000-4000-8000-00000000000f"


def items(name: str) -> list[dict[str, Any]]:
    return list(json.loads((FIXTURES / name).read_text())["items"])


ROUTES = {
    "/apis/batch/v1/namespaces/ml/jobs": "jobs.json",
    "/apis/batch/v1/jobs": "jobs.json",
    "/api/v1/namespaces/ml/pods": "pods.json",
    "/api/v1/pods": "pods.json",
    "/apis/kueue.x-k8s.io/v1beta1/namespaces/ml/workloads": "workloads.json",
    "/apis/kueue.x-k8s.io/v1beta1/workloads": "workloads.json",
}


def _matches(obj: dict[str, Any], selector: str) -> bool:
    labels = obj["metadata"].get("labels") or {}
    parts = (p.partition("=") for p in selector.split(","))
    return all(labels.get(k) == v if eq else k in labels for k, eq, v in parts)  # k=v or k


@pytest.fixture(scope="module")
def api() -> Iterator[str]:
    """A stub API server: bearer token checked, label selectors and paging honoured."""

    class Handler(JsonApiHandler):
        def do_GET(self) -> None:
            url = urlparse(self.path)
            query = {k: v[0] for k, v in parse_qs(url.query).items()}
            if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                return self._send(
                    401,
                    {"kind": "Status", "status": "Failure", "code": 401, "reason": "Unauthorized"},
                )
            if url.path not in ROUTES:
                return self._send(
                    404, {"kind": "Status", "status": "Failure", "code": 404, "reason": "NotFound"}
                )
            body = json.loads((FIXTURES / ROUTES[url.path]).read_text())
            found = (
                [o for o in body["items"] if _matches(o, query.get("labelSelector", ""))]
                if query.get("labelSelector")
                else body["items"]
            )
            start = int(query.get("continue", "0"))
            page = 2  # the stub pages two at a time, whatever limit asks
            body["items"] = found[start : start + page]
            if start + page < len(found):
                body["metadata"]["continue"] = str(start + page)
            return self._send(200, body)

    with serving(Handler) as url:
        yield url


def kubeconfig(tmp_path: Path, server: str, token: str = TOKEN) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\n"
        f"clusters:\n- name: stub\n  cluster: {{server: '{server}'}}\n"
        f"users:\n- name: importer\n  user: {{token: {token}}}\n"
        "contexts:\n- name: stub\n  context: {cluster: stub, user: importer, namespace: ml}\n"
        "current-context: stub\n"
    )
    return path


def args(config: Path, *argv: str) -> Any:
    flags = ["--kubeconfig", str(config), "--url", "http://testserver"]
    return cli.parser().parse_args(["import", "kubernetes", *flags, *argv])


def test_mapping_of_the_recorded_objects() -> None:
    options = Options(pipeline_label="cadence.dev/pipeline")
    mapped = map_all(items("jobs.json"), items("pods.json"), items("workloads.json"), options)
    unread = {m.source: m.reason for m in mapped if m.payload is None}
    assert unread == {"Job ml/etl-nightly": "no nvidia.com/gpu limit on its pods"}
    runs = {m.payload["run_id"]: m for m in mapped if m.payload}
    a = runs[A].payload
    assert (a["pipeline"], a["outcome"], a["workers"]) == ("ranker", "succeeded", 8)  # 2 pods x 4
    assert (a["started_at"], a["finished_at"]) == (
        "2026-11-02T08:30:00+00:00",
        "2026-11-02T22:30:00+00:00",
    )
    assert a["scheduling_wait_hours"] == 0.5  # created 08:00, Kueue admitted 08:30
    assert a["retraining_id"] == "ranker-train-2026-11-02T08:00:00Z"  # CronJob's scheduled time
    assert a["gpu_type"] == "a100-80gb"  # the Kueue flavor
    assert a["interruptions"] == [{"cause": "container restart"}]
    assert a["tags"] == {
        "k8s_namespace": "ml",
        "k8s_job": "ranker-train-29012345",
        "k8s_cronjob": "ranker-train",
        "kueue_queue": "team-a",
    }
    b = runs[B].payload
    assert b["outcome"] == "preempted"  # Failed, and its pod was evicted
    assert b["scheduling_wait_hours"] == pytest.approx(5 / 60, abs=1e-6)  # PodScheduled 08:05
    assert b["finished_at"] == "2026-11-03T10:00:00+00:00"  # the Failed condition's time
    assert b["interruptions"] == [{"cause": "pod EvictionByEvictionAPI"}]
    # The manual rerun is labelled into the same retraining as the preempted attempt.
    assert (
        runs[C].payload["retraining_id"]
        == b["retraining_id"]
        == "ranker-train-2026-11-03T08:00:00Z"
    )
    assert runs[C].payload["gpu_type"] == "NVIDIA-A100-SXM4-80GB"  # the template's node selector
    f = runs[F].payload
    assert (f["outcome"], f["workers"]) == ("cancelled", 8)  # its Workload was deactivated
    # GPU-hours: 8 x 14 h = 112; 1 x 1 h 55 min = 1.9167; 1 x 2 h = 2; 8 x 2 h = 16.
    rows = totals([attempt_of(runs[k].payload) for k in (A, B, C)])
    assert rows["ranker"].gpu_hours == pytest.approx(112 + 115 / 60 + 2)
    assert totals([attempt_of(runs[F].payload)])["vision"].gpu_hours == pytest.approx(16.0)
    # The active Job is a running attempt: no finish or restarts until the next import.
    running = runs["0a1b2c3d-0000-4000-8000-00000000000d"].payload
    assert (running["outcome"], running["started_at"]) == ("running", "2026-11-04T09:01:00+00:00")
    assert "finished_at" not in running and "interruptions" not in running


def test_the_active_job_once_complete_maps_to_the_same_run_finished() -> None:
    options = Options(pipeline_label="cadence.dev/pipeline")
    jobs = [j for j in items("jobs.json") if j["metadata"]["name"] == "vision-train-7"]
    done = copy.deepcopy(jobs)
    done[0]["status"].update(
        active=0, completionTime="2026-11-04T11:01:00Z",
        conditions=[{"type": "Complete", "status": "True",
                     "lastTransitionTime": "2026-11-04T11:01:00Z"}],
    )  # fmt: skip
    [before] = map_all(jobs, items("pods.json"), items("workloads.json"), options)
    [after] = map_all(done, items("pods.json"), items("workloads.json"), options)
    assert before.payload and after.payload
    assert before.payload["run_id"] == after.payload["run_id"]
    assert (after.payload["outcome"], after.payload["finished_at"]) == (
        "succeeded",
        "2026-11-04T11:01:00+00:00",
    )


def test_dry_run_through_the_real_client_and_a_kubeconfig(
    api: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = kubernetes_command.run_import(
        args(kubeconfig(tmp_path, api), "--pipeline-label", "cadence.dev/pipeline", "--dry-run")
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "read 6 Jobs, 0 training objects, 5 Pods, 2 Kueue Workloads" in err  # all pages followed
    # ranker: retrainings A and B+C; 112 + 1.9167 + 2 = 115.92 GPU-hours.
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines()[1:]}
    # PIPELINE RETRAININGS ATTEMPTS OK FAILED PREEMPT CANCEL GPU-HOURS NO-UTIL
    assert rows["ranker"] == ["2", "3", "2", "0", "1", "0", "115.92", "3"]
    # vision: the cancelled Job F and the running one (no GPU-hours until it ends).
    assert rows["vision"] == ["2", "2", "0", "0", "0", "1", "16.00", "2"]
    assert "not imported: Job ml/etl-nightly: no nvidia.com/gpu limit on its pods" in err


def test_selector_reaches_the_api(
    api: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = kubernetes_command.run_import(
        args(
            kubeconfig(tmp_path, api),
            "--pipeline",
            "vision",
            "--selector",
            "cadence.dev/pipeline=vision",
            "--dry-run",
        )
    )
    assert code == 0
    assert "read 2 Jobs" in capsys.readouterr().err


def test_refused_credentials_exit_2(
    api: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = kubeconfig(tmp_path, api, token="wrong")
    assert kubernetes_command.run_import(args(config, "--pipeline", "p", "--dry-run")) == 2
    assert "refused the credentials (401 Unauthorized)" in capsys.readouterr().err


def test_unreachable_api_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    server = f"http://127.0.0.1:{free_port()}"
    code = kubernetes_command.run_import(
        args(kubeconfig(tmp_path, server), "--pipeline", "p", "--dry-run")
    )
    assert code == 2
    assert f"the Kubernetes API at {server} is unreachable" in capsys.readouterr().err


def test_a_missing_kubeconfig_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = kubernetes_command.run_import(args(tmp_path / "absent", "--pipeline", "p", "--dry-run"))
    assert code == 2
    assert "kubeconfig:" in capsys.readouterr().err


def test_import_then_reimport_stores_nothing_twice(
    api: str, tmp_path: Path, client: TestClient, db: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    token = make_token(db, "ingest")
    argv = args(
        kubeconfig(tmp_path, api), "--pipeline-label", "cadence.dev/pipeline", "--token", token
    )
    assert kubernetes_command.run_import(argv, transport=through(client, [])) == 0
    assert "(5 created / 0 already there)" in capsys.readouterr().out  # one running
    assert kubernetes_command.run_import(argv, transport=through(client, [])) == 0
    assert "(0 created / 5 already there)" in capsys.readouterr().out


def test_prometheus_url_fills_utilization_before_posting(
    api: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    queries: list[str] = []

    def prometheus(request: httpx.Request) -> httpx.Response:
        query = parse_qs(request.content.decode())["query"][0]
        queries.append(query)
        series = []
        if "ranker-train-29012345-" in query:  # one Job's pods have DCGM series
            values = [[1793600000, "0.6"], [1793600060, "0.4"]]  # mean 0.5
            series = [{"metric": {"cadence_metric": "profiling"}, "values": values}]
        data = {"resultType": "matrix", "result": series}
        return httpx.Response(200, json={"status": "success", "data": data})

    argv = args(
        kubeconfig(tmp_path, api),
        "--pipeline-label",
        "cadence.dev/pipeline",
        "--prometheus-url",
        "http://prometheus.test:9090",
        "--dry-run",
    )
    code = kubernetes_command.run_import(argv, prometheus_transport=httpx.MockTransport(prometheus))
    out, err = capsys.readouterr()
    assert code == 0, err
    assert 'namespace="ml", pod=~"ranker-train-29012345-.*"' in queries[0]
    assert "utilization from Prometheus: 1 of 4 runs" in err
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines()[1:]}
    assert rows["ranker"][-1] == "2"  # of three attempts, two still without utilization
