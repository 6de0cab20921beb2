"""``cadence enrich prometheus`` beyond one pod per GPU: MIG slices weighed by their size
and the node-level matcher for sites without ``hpc_job`` (a real Prometheus scraping the
fake exporter of tests/fixtures/dcgm.py), and what an enrichment records: its source,
coverage and note in the measurement audit, shown on the run's page, with
``--min-coverage`` skipping runs whose series cover too little (a recorded answer)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from app import cli
from app.db.engine import Database
from app.sources import enrich_command
from app.sources.prometheus import AnswerError, choice, matcher
from tests.fixtures.builders import make_run, make_token
from tests.fixtures.client import through
from tests.fixtures.dcgm import Gpu, Stack, prometheus_stack

URL = "http://testserver"
NODES = 'Hostname=~"{slurm_nodes|any}"'
GPUS = [
    # Slurm jobs on whole nodes, no hpc_job label: gpu-07 holds two GPUs, gpu-08 one.
    Gpu("slurm-a", 0, util=70, profiling=0.6, host="gpu-07"),
    Gpu("slurm-b", 1, util=90, profiling=0.8, host="gpu-07"),
    Gpu("slurm-c", 0, util=50, profiling=0.4, host="gpu-08"),
    # One A100 cut in two MIG instances of one pod: 3g.40gb at 0.9, 1g.10gb at 0.1 (a
    # MIG instance serves no GPU_UTIL; both share the GPU's UUID).
    Gpu("mig-job-worker-0", 0, util=None, profiling=0.9, host="node-9", mig="3g.40gb",
        instance=1, uuid="GPU-a100-0"),
    Gpu("mig-job-worker-0", 0, util=None, profiling=0.1, host="node-9", mig="1g.10gb",
        instance=2, uuid="GPU-a100-0"),
]  # fmt: skip


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with prometheus_stack(GPUS, tmp_path_factory.mktemp("prometheus-nodes")) as running:
        yield running


def enrich(client: TestClient, token: str, prometheus: str, match: str, *argv: str,
           prometheus_transport: httpx.BaseTransport | None = None) -> int:  # fmt: skip
    flags = ["--prometheus-url", prometheus, "--match", match, "--url", URL, "--token", token]
    args = cli.parser().parse_args(["enrich", "prometheus", *flags, *argv])
    return enrich_command.run_enrich(
        args, transport=through(client, []), prometheus_transport=prometheus_transport
    )


def store(client: TestClient, token: str, runs: list[dict[str, Any]], seconds: int = 3) -> None:
    end = datetime.now(UTC).replace(microsecond=0)
    window = {"started_at": (end - timedelta(seconds=seconds)).isoformat(),
              "finished_at": end.isoformat(), "data_stall_hours": 0.0,
              "checkpoint_hours": 0.0, "interruptions": []}  # fmt: skip
    body = {"runs": [make_run(**{"gpu_utilization": None, **window, **r}) for r in runs]}
    answer = client.post(
        "/api/v1/runs/batch", json=body, headers={"Authorization": f"Bearer {token}"}
    )
    assert answer.status_code == 201, answer.text


def stored(client: TestClient, pipeline: str) -> dict[str, dict[str, Any]]:
    runs = client.get("/api/v1/runs", params={"pipeline": pipeline}).json()["runs"]
    return {r["run_id"]: r for r in runs}


def test_the_node_matcher_fills_each_host_as_itself() -> None:
    run = {"run_id": "r", "pipeline": "p", "tags": {"slurm_nodes": "gpu-07,gpu.08"}}
    # A dot in a host name is matched as a dot, not any character.
    assert matcher(NODES, run) == 'Hostname=~"gpu-07|gpu\\\\.08"'
    with pytest.raises(KeyError):
        matcher(NODES, {"run_id": "r", "pipeline": "p", "tags": {"slurm_nodes": ""}})


def test_mig_series_are_told_apart_by_instance_and_weighed() -> None:
    def series(instance: int, profile: str, value: float) -> dict[str, Any]:
        labels = {"cadence_metric": "profiling", "UUID": "GPU-0", "GPU_I_ID": str(instance),
                  "GPU_I_PROFILE": profile}  # fmt: skip
        return {"metric": labels, "values": [[0, str(value)], [1, str(value)]]}

    data = {"result": [series(1, "3g.40gb", 0.9), series(2, "1g.10gb", 0.1)]}
    # (3/7 x 0.9 + 1/7 x 0.1) / (4/7) = 2.8 / 4 = 0.70; keyed by UUID alone the second
    # slice would have replaced the first (0.10).
    assert choice(data, 2).utilization == pytest.approx(0.70)
    with pytest.raises(AnswerError, match="found 2 GPUs for a run of 1"):
        choice(data, 2, workers=1)
    data["result"][0]["metric"]["GPU_I_PROFILE"] = "5g.33gb"
    with pytest.raises(AnswerError, match=r"MIG profile '5g\.33gb'"):
        choice(data, 2)


def test_node_level_matcher_and_mig_slices_from_a_real_prometheus(
    stack: Stack, client: TestClient, db: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    token = make_token(db, "ingest")
    store(client, token, [
        # Whole nodes gpu-07 and gpu-08, 3 GPUs: (0.6 + 0.8 + 0.4) / 3 = 0.60.
        {"pipeline": "nodes", "run_id": "job-41", "workers": 3,
         "tags": {"slurm_nodes": "gpu-07,gpu-08"}},
        # 1 GPU of gpu-07, shared with another job: the node's 2 GPUs are not its own.
        {"pipeline": "nodes", "run_id": "job-42", "workers": 1, "tags": {"slurm_nodes": "gpu-07"}},
    ])  # fmt: skip
    assert enrich(client, token, stack.url, NODES, "--pipeline", "nodes") == 0
    err = capsys.readouterr().err
    runs = stored(client, "nodes")
    assert runs["job-41"]["gpu_utilization"] == pytest.approx(0.60)
    assert runs["job-42"]["gpu_utilization"] is None
    assert "not enriched: run job-42: --match found 2 GPUs for a run of 1" in err
    store(client, token, [{"pipeline": "mig", "run_id": "mig-job", "workers": 2,
                           "tags": {"namespace": "ml"}}])  # fmt: skip
    assert enrich(client, token, stack.url, 'pod=~"{run_id}-worker-.*"', "--pipeline", "mig") == 0
    # The 3g slice at 0.9 and the 1g at 0.1, weighed: 0.70 (the plain mean says 0.50).
    assert stored(client, "mig")["mig-job"]["gpu_utilization"] == pytest.approx(0.70)


def half_covered(request: httpx.Request) -> httpx.Response:
    """A query_range answer holding 2 of the window's points on its one GPU."""
    params = dict(httpx.QueryParams(request.content.decode()))
    start = float(params["start"])
    labels = {"cadence_metric": "profiling", "UUID": "GPU-1"}
    values = [[start, "0.85"], [start + 1, "0.85"]]
    data = {"resultType": "matrix", "result": [{"metric": labels, "values": values}]}
    return httpx.Response(200, json={"status": "success", "data": data})


def test_an_enrichment_records_its_source_and_coverage_and_the_page_shows_them(
    client: TestClient, db: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    token = make_token(db, "ingest")
    # Ingested at 0.41 from NVML; DCGM's series hold 2 of the 3 s window's 4 points.
    nvml = {"gpu_utilization": 0.41, "utilization_source": "nvml_gpu_util"}
    store(client, token, [{"pipeline": "cover", "run_id": "half", "workers": 1, **nvml}])
    mock = httpx.MockTransport(half_covered)
    prometheus = "http://prometheus.test:9090"
    code = enrich(client, token, prometheus, 'pod="x"', "--overwrite", "--min-coverage", "0.9",
                  prometheus_transport=mock)  # fmt: skip
    assert code == 0
    err = capsys.readouterr().err
    assert "not enriched: run half: the DCGM series cover 50% of the run's wall clock" in err
    assert "(below --min-coverage)" in err
    run = stored(client, "cover")["half"]
    assert run["gpu_utilization"] == pytest.approx(0.41)  # skipped: as it was
    # Without --min-coverage: stored, and the audit keeps its source, coverage and note.
    code = enrich(client, token, prometheus, 'pod="x"', "--overwrite", prometheus_transport=mock)
    assert code == 0
    audit = client.get("/api/v1/pipelines/cover/runs/half/measurement-changes").json()["changes"]
    recorded = {c["field"]: (c["old_value"], c["new_value"]) for c in audit}
    assert recorded["gpu_utilization"] == ("0.41", "0.85")
    assert recorded["utilization_source"] == ("nvml_gpu_util", "dcgm_gr_engine_active")
    assert recorded["utilization_coverage"] == (None, "0.5")  # 2 of 4 points
    assert "cover 50%" in (recorded["utilization_note"][1] or "")
    page = client.get(f"/runs/{run['id']}").text
    assert "Where the utilization comes from" in page
    assert page.count("data-reading") == 2  # as ingested, then DCGM
    assert "50%" in page and "as ingested" in page
    # 0.85 - 0.41 = 0.44 > 0.15: the page says the two sources disagree.
    assert "dcgm_gr_engine_active read 0.85 and nvml_gpu_util 0.41, 0.44 apart" in page


def test_coverage_or_a_note_without_a_utilization_is_refused(
    client: TestClient, db: Database
) -> None:
    token = make_token(db, "ingest")
    store(client, token, [{"pipeline": "cover", "run_id": "r1", "workers": 1}])
    headers = {"Authorization": f"Bearer {token}"}
    body = {"runs": [{"run_id": "r1", "mfu": 0.3, "utilization_coverage": 0.5}]}
    answer = client.post("/api/v1/pipelines/cover/measurements", json=body, headers=headers)
    assert answer.status_code == 422
    assert answer.json()["error"]["fields"][0]["field"] == "runs.0.utilization_coverage"
    assert client.get("/api/v1/runs", params={"pipeline": "cover"}).json()["runs"][0]["mfu"] != 0.3
    body = {"runs": [{"run_id": "r1", "gpu_utilization": 0.5, "utilization_coverage": 1.5}]}
    answer = client.post("/api/v1/pipelines/cover/measurements", json=body, headers=headers)
    assert answer.status_code == 422 and "utilization_coverage" in json.dumps(answer.json())


@pytest.mark.parametrize("floor", ["0", "1.5", "-0.2"])
def test_min_coverage_outside_0_to_1_is_a_usage_error(
    client: TestClient, db: Database, capsys: pytest.CaptureFixture[str], floor: str
) -> None:
    token = make_token(db, "ingest")
    code = enrich(client, token, "http://prometheus.test:9090", 'pod="x"', "--min-coverage", floor)
    assert code == 2
    assert f"--min-coverage {float(floor):g}: expected a share" in capsys.readouterr().err
