"""Issue 36, items 5, 6 and 7: the red team's reproductions of unbounded memory, values
that are not measurements and tracebacks, replayed against Prometheus/DCGM, MLflow,
Kubernetes paging and the sacct reader."""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from itertools import count
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from urllib.parse import parse_qs

import httpx
import pytest
from cadence_client.mlflow import mlflow_api
from cadence_client.mlflow.mapping import Mapping, map_run
from cadence_client.mlflow.mlflow_api import MlflowClient, MlflowError

from app.sources import kubernetes_api, prometheus_api, sacct_json
from app.sources.enrich_command import measure
from app.sources.kubernetes_api import KubeError, KubeSource
from app.sources.posting import check_all
from app.sources.prometheus_api import PrometheusClient
from app.sources.slurm import Options
from app.sources.slurm_command import Records

START = datetime(2026, 11, 2, 8, tzinfo=UTC)
UTIL = {"cadence_metric": "gpu_util"}


def stored_run(run_id: str) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "pipeline": "ranker",
        "started_at": START.isoformat(),
        "finished_at": (START + timedelta(hours=1)).isoformat(),
        "tags": {},
    }


def matrix(gpu_util: list[str], profiling: list[str] | None = None) -> dict[str, Any]:
    result = [{"metric": {"cadence_metric": "gpu_util"}, "values": [[1, v] for v in gpu_util]}]
    if profiling is not None:
        result.append(
            {"metric": {"cadence_metric": "profiling"}, "values": [[1, v] for v in profiling]}
        )
    return {"status": "success", "data": {"resultType": "matrix", "result": result}}


def prometheus(answers: dict[str, Any]) -> PrometheusClient:
    """A Prometheus answering each run's window with ``answers[run_id]`` (bytes as is)."""

    def handle(request: httpx.Request) -> httpx.Response:
        query = parse_qs(request.content.decode())["query"][0]
        run_id = query.split('pod=~"')[1].split("-.*")[0]
        body = answers[run_id]
        content = body if isinstance(body, bytes) else json.dumps(body).encode()
        return httpx.Response(200, content=content)

    return PrometheusClient("http://prometheus", transport=httpx.MockTransport(handle))


def enrich(answers: dict[str, Any]) -> tuple[dict[str, float], dict[str, str]]:
    """(utilization by run, reason by run not enriched) of ``measure`` over the answers."""
    with prometheus(answers) as prom:
        found, unread = measure(prom, 'pod=~"{run_id}-.*"', [stored_run(r) for r in answers], 4)
    return (
        {run["run_id"]: picked.utilization for run, picked in found},
        dict(unread),
    )


def test_dcgm_values_that_are_not_measurements_are_refused_with_series_and_value() -> None:
    # Before: +Inf stored as 100 % utilization, -5 as 0, GPU_UTIL 5000 % as 100 %.
    found, unread = enrich(
        {
            "inf": matrix(["50", "+Inf"]),
            "nan": matrix(["NaN"]),
            "negative": matrix(["-5"]),
            "huge": matrix(["5000"]),
            "ratio": matrix(["50"], profiling=["1.5"]),
            "good": matrix(["87", "87"]),
        }
    )
    assert found == {"good": pytest.approx(0.87)}  # 87 % -> 0.87
    assert unread["inf"].startswith("DCGM_FI_DEV_GPU_UTIL reads inf, not a measurement")
    assert unread["nan"].startswith("DCGM_FI_DEV_GPU_UTIL reads nan")
    assert unread["negative"].startswith("DCGM_FI_DEV_GPU_UTIL reads -5")
    assert unread["huge"].startswith("DCGM_FI_DEV_GPU_UTIL reads 5000")
    assert unread["ratio"].startswith("DCGM_FI_PROF_GR_ENGINE_ACTIVE reads 1.5")


def test_prometheus_answers_of_the_wrong_shape_end_in_a_message() -> None:
    ok = {"status": "success"}
    found, unread = enrich(
        {
            "dict": {**ok, "data": {"result": {"a": 1}}},
            "list": {**ok, "data": [1, 2]},
            "series": {**ok, "data": {"result": ["x"]}},
            "labels": {**ok, "data": {"result": [{"metric": [1]}]}},
            "values": {**ok, "data": {"result": [{"metric": UTIL, "values": "x"}]}},
            "point": {**ok, "data": {"result": [{"metric": UTIL, "values": [[1]]}]}},
            "text": {**ok, "data": {"result": [{"metric": UTIL, "values": [[1, "busy"]]}]}},
            "deep": b'{"status": "success", "data": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        }
    )  # fmt: skip
    assert found == {}
    assert unread["dict"] == "Prometheus answered data whose result is not a list of series"
    assert unread["list"] == "Prometheus answered a success whose data is not an object"
    assert unread["series"] == unread["labels"]
    assert "not an object with labels" in unread["series"]
    assert unread["values"] == "Prometheus answered DCGM_FI_DEV_GPU_UTIL values that are not a list"
    assert (
        unread["point"]
        == "Prometheus answered a DCGM_FI_DEV_GPU_UTIL point that is not [time, value]"
    )
    assert unread["text"] == "DCGM_FI_DEV_GPU_UTIL reads 'busy', not a number"
    assert unread["deep"].startswith("Prometheus refused the query (200)")


def test_a_prometheus_answer_past_the_bound_is_refused_not_held(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Before: 57 MB answers were kept whole, four at a time (11 GB). Now an answer is
    # read as it arrives and dropped past MAX_ANSWER_BYTES (here 64 kB for the test).
    monkeypatch.setattr(prometheus_api, "MAX_ANSWER_BYTES", 64 * 1024)
    big = matrix([str(v % 100) for v in range(20_000)])  # about 300 kB
    found, unread = enrich({"big": big, "good": matrix(["40"])})
    assert found == {"good": pytest.approx(0.40)}
    assert unread["big"].startswith("Prometheus answered more than 64 kB for one run's window")


# -- MLflow ----------------------------------------------------------------------------


@pytest.mark.parametrize("start", [1e308, float("inf"), 10**20, -5])
def test_an_mlflow_start_time_that_is_no_time_skips_the_run_with_its_reason(start: Any) -> None:
    run = {
        "info": {"run_id": "a" * 32, "status": "FINISHED", "start_time": start, "end_time": 2},
        "data": {
            "metrics": [{"key": "gpu_utilization", "value": 0.5}],
            "params": [{"key": "workers", "value": "4"}],
        },
    }  # fmt: skip
    mapped = map_run(run, "ranker", Mapping())
    assert mapped.payload is None
    assert mapped.reason.startswith(f"start_time {start!r} is not")


def endless(same: bool) -> Callable[[httpx.Request], httpx.Response]:
    tokens = count()

    def handle(request: httpx.Request) -> httpx.Response:
        token = "same" if same else f"t{next(tokens)}"
        return httpx.Response(200, json={"runs": [{"info": {}}], "next_page_token": token})

    return handle


def test_an_mlflow_search_that_never_stops_paging_ends_with_a_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Before: a feed giving a new next_page_token forever grew past 1 GB in 40 s.
    monkeypatch.setattr(mlflow_api, "MAX_PAGES", 5)
    for same, message in ((False, "still paging after 5 pages"), (True, "same next_page_token")):
        transport = httpx.MockTransport(endless(same))
        with (
            MlflowClient("http://mlflow", transport=transport) as mlflow,
            pytest.raises(MlflowError, match=message),
        ):
            list(mlflow.search_runs("1"))


# -- Kubernetes paging -------------------------------------------------------------------


def kube_source() -> KubeSource:
    source = KubeSource.__new__(KubeSource)  # no kubeconfig: the paging alone
    source.host, source._exception = "https://k8s.example", RuntimeError
    return source


def test_a_kubernetes_list_that_never_ends_stops_with_a_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(kubernetes_api, "MAX_PAGES", 5)
    tokens = count()

    def fresh(**_kw: Any) -> Any:
        body = {"items": [{}], "metadata": {"continue": f"t{next(tokens)}"}}
        return SimpleNamespace(data=json.dumps(body))

    def same(**_kw: Any) -> Any:
        return SimpleNamespace(data=json.dumps({"items": [], "metadata": {"continue": "x"}}))

    with pytest.raises(KubeError, match="still paging after 5 pages of 500"):
        kube_source()._all(fresh, None)
    with pytest.raises(KubeError, match="same continue token twice"):
        kube_source()._all(same, None)


# -- the sacct reader's memory -----------------------------------------------------------


def sacct_text(path: Path, jobs: int) -> Path:
    header = "JobIDRaw|JobID|JobName|Account|Cluster|State|Submit|Start|End|AllocTRES"
    with path.open("w") as out:
        out.write(header + "\n")
        for n in range(1, jobs + 1):
            day = f"2026-11-{1 + n % 28:02d}"
            out.write(
                f"{n}|{n}|train|ml|hpc|COMPLETED|{day}T07:00:00|{day}T08:00:00|{day}T09:00:00|"
                "cpu=8,gres/gpu=2,node=1\n"
            )
    return path


T = 1793606400  # 2026-11-02T08:00:00Z


def sacct_json_file(path: Path, jobs: int) -> Path:
    with path.open("w") as out:
        out.write('{"meta": {"plugin": {"type": "openapi/v0.0.39"}}, "jobs": [')
        for n in range(1, jobs + 1):
            job = {
                "job_id": n, "name": "train", "cluster": "hpc", "state": {"current": "COMPLETED"},
                "time": {"submission": T + n, "start": T + 3600 + n, "end": T + 7200 + n},
                "tres": {"allocated": [{"type": "gres", "name": "gpu", "count": 2}]},
            }  # fmt: skip
            out.write(("," if n > 1 else "") + json.dumps(job))
        out.write('], "warnings": []}')
    return path


def peak_of_check(path: Path) -> tuple[int, int]:
    """(records read, peak bytes traced) of the first pass over the file."""
    records = Records(path, None, UTC, Options(pipeline="hpc"))
    tracemalloc.start()
    try:
        check = check_all(records)
        return check.ready, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("write", [sacct_text, sacct_json_file])
def test_reading_sacct_holds_one_record_at_a_time(
    tmp_path: Path, write: Callable[[Path, int], Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: a 300 MB file peaked at 2.9 GB (read whole, parsed whole). Four times the
    # records must not take four times the memory: the peak is one chunk and one record.
    monkeypatch.setattr(sacct_json, "MAX_ITEM_CHARS", 64 * 1024)
    small = peak_of_check(write(tmp_path / "small", 1_000))
    large = peak_of_check(write(tmp_path / "large", 4_000))
    assert (small[0], large[0]) == (1_000, 4_000)
    assert large[1] < small[1] * 1.5
    assert large[1] < 2 * 1024 * 1024
