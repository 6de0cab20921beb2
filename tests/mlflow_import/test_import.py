"""``cadence import mlflow``: the mapping (unit), recorded MLflow REST answers served by
``httpx.MockTransport`` and imported into the in-process app, and (when an ``mlflow``
executable is available) a real MLflow tracking server."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from cadence_client.mlflow import command
from cadence_client.mlflow.mapping import (
    Mapping,
    MappingError,
    Source,
    load_mapping,
    map_run,
    parse_mapping,
)
from cadence_client.mlflow.mlflow_api import ExperimentNotFound, MlflowClient, MlflowError
from fastapi.testclient import TestClient

from app import cli
from app.db.engine import Database
from tests.fixtures.builders import make_token
from tests.fixtures.client import through

URL = "http://testserver"
FAILED_RUN = "e5d4c3b2a1f0e9d8c7b6a5f4e3d2c1b0"  # the recorded FAILED MLflow run
IMPORTED = 3  # of the 6 recorded runs: two FINISHED, one FAILED (a failed attempt)
MLFLOW = "http://mlflow.test:5000"
FIXTURES = Path(__file__).parents[1] / "fixtures" / "mlflow"
H = 3600 * 1000
T0 = 1764576000000  # 2025-12-01T08:00:00Z


def fixture(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text())


@pytest.fixture(autouse=True)
def _no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("CADENCE_TOKEN", "CADENCE_URL", "MLFLOW_TRACKING_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("MLFLOW_TRACKING_USERNAME", raising=False)


def mlflow_run(
    *,
    run_id: str = "0123456789abcdef0123456789abcdef",
    status: str = "FINISHED",
    start: int | None = T0,
    end: int | None = T0 + 10 * H,
    metrics: dict[str, float] | None = None,
    params: dict[str, str] | None = None,
    tags: dict[str, str] | None = None,
) -> dict[str, Any]:
    """One run in the shape runs/search returns it."""
    info: dict[str, Any] = {"run_id": run_id, "run_uuid": run_id, "status": status}
    if start is not None:
        info["start_time"] = start
    if end is not None:
        info["end_time"] = end
    m = {"gpu_utilization": 0.5} if metrics is None else metrics
    p = {"workers": "4"} if params is None else params
    return {
        "info": info,
        "data": {
            "metrics": [{"key": k, "value": v, "timestamp": T0, "step": 0} for k, v in m.items()],
            "params": [{"key": k, "value": v} for k, v in p.items()],
            "tags": [{"key": k, "value": v} for k, v in (tags or {}).items()],
        },
    }


# Mapping ------------------------------------------------------------------------------


def test_defaults_map_every_field_by_its_own_name() -> None:
    run = mlflow_run(
        metrics={
            "gpu_utilization": 0.42,
            "quality": 0.41,
            "gpu_hours": 30.0,
            "data_stall_hours": 1.5,
            "checkpoint_hours": 0.5,
            "scheduling_wait_hours": 0.25,
            "mfu": 0.3,
        },
        params={"workers": "4", "price_per_gpu_hour": "2.0"},
        tags={"gpu_type": "H100", "variant": "candidate", "team": "ranking"},
    )
    mapped = map_run(run, "ranker", Mapping())
    assert mapped.reason == ""
    assert mapped.payload == {
        "pipeline": "ranker",
        "run_id": "0123456789abcdef0123456789abcdef",
        "variant": "candidate",
        "started_at": "2025-12-01T08:00:00+00:00",
        "finished_at": "2025-12-01T18:00:00+00:00",
        "workers": 4,
        "gpu_type": "H100",
        "gpu_utilization": 0.42,
        "gpu_hours": 30.0,
        "price_per_gpu_hour": 2.0,
        "quality_value": 0.41,
        "quality_metric": "quality",
        "data_stall_hours": 1.5,
        "checkpoint_hours": 0.5,
        "scheduling_wait_hours": 0.25,
        "mfu": 0.3,
        "tags": {"team": "ranking"},  # gpu_type and variant became fields
    }


def test_minimal_run_defaults_variant_to_baseline_and_has_no_quality() -> None:
    payload = map_run(mlflow_run(), "ranker", Mapping()).payload
    assert payload is not None
    assert payload["variant"] == "baseline"
    assert "quality_metric" not in payload and "quality_value" not in payload
    assert "tags" not in payload


def test_mapping_file_renames_sources(tmp_path: Path) -> None:
    path = tmp_path / "mapping.toml"
    path.write_text(
        'quality_metric = "ndcg@10"\nutilization_is_percent = false\n'
        '[fields]\ngpu_utilization = "metrics.gpu_util"\nworkers = "params.num_gpus"\n'
        'quality = "metrics.val_ndcg"\ngpu_type = "params.accelerator"\n'
    )
    mapping = load_mapping(path)
    assert mapping.fields["workers"] == Source("params", "num_gpus")
    run = mlflow_run(
        metrics={"gpu_util": 0.61, "val_ndcg": 0.44, "gpu_utilization": 0.1},
        params={"num_gpus": "16", "workers": "2", "accelerator": "A100"},
    )
    payload = map_run(run, "ranker", mapping).payload
    assert payload is not None
    assert (payload["workers"], payload["gpu_utilization"]) == (16, 0.61)
    assert (payload["quality_metric"], payload["quality_value"]) == ("ndcg@10", 0.44)
    assert payload["gpu_type"] == "A100"
    # a mapped field looks only where the mapping says
    missing = map_run(mlflow_run(params={"workers": "2"}), "ranker", mapping)
    assert missing.reason == "no workers (looked for params.num_gpus)"


def test_a_percentage_is_skipped_unless_the_mapping_says_percent() -> None:
    run = mlflow_run(metrics={"gpu_utilization": 38.0})
    skipped = map_run(run, "ranker", Mapping())
    assert skipped.payload is None
    assert skipped.reason.startswith("gpu_utilization 38 (metrics.gpu_utilization) looks like")
    assert "utilization_is_percent = true" in skipped.reason
    percent = Mapping(utilization_is_percent=True)
    payload = map_run(run, "ranker", percent).payload
    assert payload is not None and payload["gpu_utilization"] == pytest.approx(0.38)
    fraction = map_run(mlflow_run(metrics={"gpu_utilization": 0.38}), "ranker", percent)
    assert fraction.payload is not None and fraction.payload["gpu_utilization"] == 0.38
    too_big = map_run(mlflow_run(metrics={"gpu_utilization": 380.0}), "ranker", percent)
    assert too_big.payload is None and "gpu_utilization" in too_big.reason


def test_tags_skip_mlflow_internal_ones_and_are_truncated_to_the_limits() -> None:
    tags = {f"k{i:02d}": "v" for i in range(60)}
    tags |= {"mlflow.runName": "x", "mlflow.user": "ci", "a" * 150: "long", "note": "x" * 900}
    tags["ctl"] = "a\x00b"
    payload = map_run(mlflow_run(tags=tags), "ranker", Mapping()).payload
    assert payload is not None
    out = payload["tags"]
    assert len(out) == 50
    assert not any(k.startswith("mlflow.") for k in out)
    assert out["a" * 100] == "long"
    assert out["ctl"] == "a b"
    assert "note" not in out  # sorted by key: the 50 first are kept, deterministically
    assert all(len(v) <= 500 for v in out.values())
    few = map_run(mlflow_run(tags={"note": "x" * 900}), "ranker", Mapping()).payload
    assert few is not None and few["tags"]["note"] == "x" * 500


def test_variant_tag_option_picks_the_tag() -> None:
    run = mlflow_run(tags={"variant": "a", "arm": "b"})
    payload = map_run(run, "ranker", Mapping(), variant_tag="arm").payload
    assert payload is not None
    assert payload["variant"] == "b" and payload["tags"] == {"variant": "a"}


@pytest.mark.parametrize(
    ("run", "reason"),
    [
        (mlflow_run(status="RUNNING", end=None), "no end_time (status RUNNING)"),
        (mlflow_run(status="SCHEDULED"), "status SCHEDULED (FINISHED, FAILED and KILLED runs"),
        (mlflow_run(start=None), "no start_time"),
        (mlflow_run(end=T0), "end_time is not after start_time"),
        (
            mlflow_run(params={}),
            "no workers (looked for metrics.workers, params.workers, tags.workers)",
        ),
        (
            mlflow_run(metrics={}),
            "no gpu_utilization (looked for metrics.gpu_utilization, "
            "params.gpu_utilization, tags.gpu_utilization, "
            "metrics.system/gpu_utilization_percentage)",
        ),
        (mlflow_run(params={"workers": "2.5"}), "workers '2.5' (params.workers) is not a whole"),
        (mlflow_run(params={"workers": "eight"}), "workers 'eight' (params.workers) is not a n"),
        (
            mlflow_run(metrics={"gpu_utilization": 0.5, "mfu": "NaN"}),  # type: ignore[dict-item]
            "mfu 'NaN' (metrics.mfu) is not a finite number",
        ),
        (
            mlflow_run(metrics={"gpu_utilization": -0.5}),
            "gpu_utilization -0.5 (metrics.gpu_utilization) is not a fraction between 0 and 1",
        ),
    ],
)
def test_skip_reasons(run: dict[str, Any], reason: str) -> None:
    mapped = map_run(run, "ranker", Mapping())
    assert mapped.payload is None
    assert mapped.reason.startswith(reason)


def test_failed_and_killed_runs_are_failed_and_cancelled_attempts() -> None:
    failed = map_run(mlflow_run(status="FAILED", metrics={}), "ranker", Mapping()).payload
    assert failed is not None and failed["outcome"] == "failed"
    assert "gpu_utilization" not in failed  # crashed before it was known: still paid for
    killed = map_run(mlflow_run(status="KILLED"), "ranker", Mapping()).payload
    assert killed is not None and killed["outcome"] == "cancelled"
    finished = map_run(mlflow_run(), "ranker", Mapping()).payload
    assert finished is not None and "outcome" not in finished  # succeeded: the default


def history_of(points: dict[str, list[tuple[int, float]]]) -> Any:
    return lambda key: points.get(key, [])


def test_utilization_is_the_mean_of_its_history_over_the_run() -> None:
    run = mlflow_run(metrics={"gpu_utilization": 0.9})  # the last value logged
    # Logged at 1 h, 5 h and 9 h of a 10 h run, and once 2 h after it ended (a late
    # sample, not this run's): (0.3 + 0.5 + 0.4) / 3 = 0.4.
    points = {"gpu_utilization": [(T0 + H, 0.3), (T0 + 5 * H, 0.5), (T0 + 9 * H, 0.4),
                                  (T0 + 12 * H, 0.9)]}  # fmt: skip
    payload = map_run(run, "ranker", Mapping(), history=history_of(points)).payload
    assert payload is not None and payload["gpu_utilization"] == pytest.approx(0.4)
    assert "utilization_source" not in payload  # unknown for a metric of the user's own
    sourced = Mapping(utilization_source="dcgm_sm_active")
    payload = map_run(run, "ranker", sourced, history=history_of(points)).payload
    assert payload is not None and payload["utilization_source"] == "dcgm_sm_active"


def test_mlflows_system_metric_is_recognised_as_a_percentage_sampled_by_nvml() -> None:
    system = "system/gpu_utilization_percentage"
    run = mlflow_run(metrics={system: 70.0})
    # 60% and 80% during the run: mean 70% -> 0.7.
    points = {system: [(T0 + H, 60.0), (T0 + 2 * H, 80.0)]}
    payload = map_run(run, "ranker", Mapping(), history=history_of(points)).payload
    assert payload is not None
    assert payload["gpu_utilization"] == pytest.approx(0.7)
    assert payload["utilization_source"] == "nvml_gpu_util"
    # Per-GPU metrics only (MLflow logs one per device): the mean of the GPUs' means,
    # (40 + 60) / 2 = 50% -> 0.5, from their last values when no history is given.
    per_gpu = mlflow_run(
        metrics={"system/gpu_0_utilization_percentage": 40.0,
                 "system/gpu_1_utilization_percentage": 60.0}
    )  # fmt: skip
    payload = map_run(per_gpu, "ranker", Mapping()).payload
    assert payload is not None and payload["gpu_utilization"] == pytest.approx(0.5)


def test_a_run_the_server_refuses_is_skipped_with_its_reason_and_the_rest_imported(
    client: TestClient, db: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    good = mlflow_run(run_id="good0123456789abcdef0123456789ab")
    bad = mlflow_run(
        run_id="bad00123456789abcdef0123456789ab",
        metrics={"gpu_utilization": 0.5, "data_stall_hours": -1.0},
    )

    def mlflow(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("get-by-name"):
            return httpx.Response(200, json=fixture("experiments_get_by_name.json"))
        if request.url.path.endswith("get-history"):
            return httpx.Response(200, json={"metrics": []})
        return httpx.Response(200, json={"runs": [bad, good]})

    code = command.run_import(
        args("--token", make_token(db, "ingest")),
        transport=through(client, []),
        mlflow_transport=httpx.MockTransport(mlflow),
        sleep=pytest.fail,
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "skipped bad00123456789abcdef0123456789ab: invalid for Cadence: data_stall_hours" in err
    assert out.strip() == "found 2, imported 1 (1 created / 0 already there), skipped 1"
    assert set(stored(client)) == {"good0123456789abcdef0123456789ab"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[fields]\ngpu_util = "metrics.x"\nworkerz = "params.n"\n', "gpu_util, workerz"),
        ('colour = "red"\n', "unknown key(s) colour"),
        ('[fields]\nworkers = "hyperparams.n"\n', "fields.workers = 'hyperparams.n'"),
        ("utilization_is_percent = 1\n", "utilization_is_percent must be true or false"),
        ("[fields\n", "not valid TOML"),
    ],
)
def test_a_bad_mapping_exits_2_naming_the_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, message: str
) -> None:
    path = tmp_path / "m.toml"
    path.write_text(text)
    with pytest.raises(MappingError, match=r"."):
        load_mapping(path)
    code = command.run_import(
        args("--mapping", str(path), "--token", "t"),
        transport=no_server(),
        mlflow_transport=no_server(),
    )
    assert code == 2
    assert message in capsys.readouterr().err


def test_parse_mapping_accepts_every_documented_field() -> None:
    fields = {
        name: f"metrics.{name}"
        for name in [
            "workers",
            "gpu_utilization",
            "gpu_type",
            "gpu_hours",
            "price_per_gpu_hour",
            "quality",
            "data_stall_hours",
            "checkpoint_hours",
            "scheduling_wait_hours",
            "mfu",
            "variant",
        ]
    }
    assert len(parse_mapping({"fields": fields}).fields) == 11


# Recorded MLflow answers --------------------------------------------------------------


def args(*argv: str, experiment: str = "ranker-training") -> Any:
    return cli.parser().parse_args(
        [
            "import",
            "mlflow",
            "--tracking-uri",
            MLFLOW,
            "--experiment",
            experiment,
            "--pipeline",
            "mlflow-ranker",
            "--url",
            URL,
            *argv,
        ]
    )


def no_server() -> httpx.MockTransport:
    def handle(request: httpx.Request) -> httpx.Response:
        raise AssertionError(f"no request expected, got {request.method} {request.url}")

    return httpx.MockTransport(handle)


def recorded(requests: list[httpx.Request]) -> httpx.MockTransport:
    """MLflow's REST API answering from the recorded fixtures (two pages of runs)."""

    def handle(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        path = request.url.path
        if path == "/api/2.0/mlflow/experiments/get-by-name":
            if request.url.params.get("experiment_name") == "ranker-training":
                return httpx.Response(200, json=fixture("experiments_get_by_name.json"))
            return httpx.Response(404, json=fixture("experiment_not_found.json"))
        if path == "/api/2.0/mlflow/runs/search" and request.method == "POST":
            body = json.loads(request.content)
            assert body["experiment_ids"] == ["1"] and body["max_results"] == 1000
            page = body.get("page_token")
            if page is None:
                return httpx.Response(200, json=fixture("runs_search_page1.json"))
            assert page == "eyJvZmZzZXQiOiAzfQ=="
            return httpx.Response(200, json=fixture("runs_search_page2.json"))
        if path == "/api/2.0/mlflow/metrics/get-history":
            run, key = request.url.params["run_id"], request.url.params["metric_key"]
            points = [p for p in HISTORY.get(run, []) if p["key"] == key]
            return httpx.Response(200, json={"metrics": points})
        return httpx.Response(
            404, json={"error_code": "ENDPOINT_NOT_FOUND", "message": f"no {path}"}
        )

    return httpx.MockTransport(handle)


# The first recorded run ends at T0 + 14 h; a monitoring job logged its quality daily
# after that (and once during training, which is not an evaluation of the served model).
# Its utilization was logged at 1 h and 13 h (0.30, 0.50: mean 0.40) and once after it
# ended (0.42, the value runs/search shows), which the mean leaves out.
HISTORY = {
    "a1f0c2d3e4b5a6978877665544332211": [
        {"key": "gpu_utilization", "value": 0.30, "timestamp": T0 + H, "step": 0},
        {"key": "gpu_utilization", "value": 0.50, "timestamp": T0 + 13 * H, "step": 1},
        {"key": "gpu_utilization", "value": 0.42, "timestamp": T0 + 15 * H, "step": 2},
        {"key": "live_quality", "value": 0.5, "timestamp": T0 + H, "step": 0},
        *(
            {
                "key": "live_quality",
                "value": 0.412 - 0.001 * d,
                "timestamp": T0 + 14 * H + d * 24 * H,
                "step": d,
            }
            for d in range(3)
        ),
    ]
}


def stored(client: TestClient, pipeline: str = "mlflow-ranker") -> dict[str, dict[str, Any]]:
    answer = client.get("/api/v1/runs", params={"pipeline": pipeline, "limit": 1000})
    assert answer.status_code == 200
    return {r["run_id"]: r for r in answer.json()["runs"]}


def test_import_recorded_experiment_then_reimport_creates_nothing(
    client: TestClient, db: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    token = make_token(db, "ingest")
    requests: list[httpx.Request] = []
    statuses: list[int] = []
    code = command.run_import(
        args("--token", token),
        transport=through(client, statuses),
        mlflow_transport=recorded(requests),
        sleep=pytest.fail,
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    paths = [r.url.path.rsplit("/", 1)[-1] for r in requests]
    # Utilization's history for the four runs that reach it (not RUNNING, not workerless).
    # Runs are mapped as their page arrives (never held raw together): the histories of
    # a page's runs are asked for before the next page.
    assert paths[:2] == ["get-by-name", "search"] and paths.count("search") == 2
    assert sorted(paths[2:]) == ["get-history"] * 4 + ["search"]
    assert (
        out.strip() == f"found 6, imported {IMPORTED} ({IMPORTED} created / 0 already there), "
        f"skipped {6 - IMPORTED}"
    )
    assert "skipped c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8: no end_time (status RUNNING)" in err
    assert "skipped d4c3b2a1f0e9d8c7b6a5f4e3d2c1b0a9: gpu_utilization 38" in err
    assert "skipped f6e5d4c3b2a1f0e9d8c7b6a5f4e3d2c1: no workers" in err

    runs = stored(client)
    assert set(runs) == {
        "a1f0c2d3e4b5a6978877665544332211",
        "b2e1d3c4f5a6b7c8d9e0f1a2b3c4d5e6",
        FAILED_RUN,
    }
    assert runs[FAILED_RUN]["outcome"] == "failed"
    assert runs[FAILED_RUN]["retraining_id"] == FAILED_RUN  # the server's default
    first = runs["a1f0c2d3e4b5a6978877665544332211"]
    assert first["variant"] == "candidate"
    assert first["workers"] == 8 and first["gpu_type"] == "A100-80GB"
    assert first["gpu_utilization"] == pytest.approx(0.40)  # the mean over the run
    assert first["wall_clock_hours"] == pytest.approx(14)
    assert first["started_at"].startswith("2025-12-01T08:00:00")
    assert (first["quality_metric"], first["quality_value"]) == ("quality", pytest.approx(0.412))
    assert first["data_stall_hours"] == pytest.approx(5.1) and first["mfu"] == pytest.approx(0.31)
    assert first["tags"] == {"git_sha": "4f1c2e9", "team": "ranking"}
    assert runs["b2e1d3c4f5a6b7c8d9e0f1a2b3c4d5e6"]["variant"] == "baseline"

    again = command.run_import(
        args("--token", token),
        transport=through(client, statuses),
        mlflow_transport=recorded([]),
        sleep=pytest.fail,
    )
    out, _ = capsys.readouterr()
    assert again == 0
    assert (
        out.strip() == f"found 6, imported {IMPORTED} (0 created / {IMPORTED} already there), "
        f"skipped {6 - IMPORTED}"
    )
    assert len(stored(client)) == IMPORTED


def test_percent_mapping_imports_the_percentage_run(
    client: TestClient, db: Database, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mapping = tmp_path / "m.toml"
    mapping.write_text('quality_metric = "ndcg@10"\nutilization_is_percent = true\n')
    code = command.run_import(
        args("--token", make_token(db, "ingest"), "--mapping", str(mapping)),
        transport=through(client, []),
        mlflow_transport=recorded([]),
        sleep=pytest.fail,
    )
    assert code == 0
    assert "created" in capsys.readouterr().out
    pct = stored(client)["d4c3b2a1f0e9d8c7b6a5f4e3d2c1b0a9"]
    assert pct["gpu_utilization"] == pytest.approx(0.38)
    assert (pct["variant"], pct["quality_metric"]) == ("sweep", "ndcg@10")


def test_dry_run_prints_the_runs_and_posts_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    code = command.run_import(
        args("--dry-run"), transport=no_server(), mlflow_transport=recorded([])
    )
    out, err = capsys.readouterr()
    assert code == 0
    lines = [json.loads(line) for line in out.splitlines()]
    assert [r["run_id"] for r in lines] == [
        "a1f0c2d3e4b5a6978877665544332211",
        "b2e1d3c4f5a6b7c8d9e0f1a2b3c4d5e6",
        FAILED_RUN,
    ]
    assert lines[0]["pipeline"] == "mlflow-ranker"
    assert "dry run: found 6, would import 3, skipped 3" in err


def test_unknown_experiment_exits_2_with_mlflows_message(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code = command.run_import(
        args("--token", "t", experiment="nope"),
        transport=no_server(),
        mlflow_transport=recorded([]),
    )
    assert code == 2
    assert f"experiment 'nope' not found at {MLFLOW}" in capsys.readouterr().err
    with (
        MlflowClient(MLFLOW, transport=recorded([])) as mlflow,
        pytest.raises(ExperimentNotFound) as info,
    ):
        mlflow.experiment_id("nope")
    assert info.value.error_code == "RESOURCE_DOES_NOT_EXIST"


def test_unreachable_or_non_mlflow_server_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    code = command.run_import(
        args("--token", "t"), transport=no_server(), mlflow_transport=httpx.MockTransport(refuse)
    )
    assert code == 2
    assert f"cannot reach the MLflow tracking server at {MLFLOW}" in capsys.readouterr().err

    def html(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text="<html>hello</html>")

    code = command.run_import(
        args("--token", "t"), transport=no_server(), mlflow_transport=httpx.MockTransport(html)
    )
    assert code == 2
    assert "is " + MLFLOW + " an MLflow tracking server?" in capsys.readouterr().err

    def denied(request: httpx.Request) -> httpx.Response:
        return httpx.Response(403, json={"error_code": "PERMISSION_DENIED", "message": "no access"})

    with (
        MlflowClient(MLFLOW, transport=httpx.MockTransport(denied)) as mlflow,
        pytest.raises(MlflowError, match="403 PERMISSION_DENIED: no access"),
    ):
        mlflow.experiment_id("ranker-training")


def test_a_repeated_page_token_stops_instead_of_looping() -> None:
    def handle(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"runs": [], "next_page_token": "same"})

    with (
        MlflowClient(MLFLOW, transport=httpx.MockTransport(handle)) as mlflow,
        pytest.raises(MlflowError, match="same next_page_token twice"),
    ):
        list(mlflow.search_runs("1"))


def test_cadence_errors_map_to_report_exit_codes(
    client: TestClient, db: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    assert command.run_import(args(), transport=no_server(), mlflow_transport=no_server()) == 2
    assert "no token" in capsys.readouterr().err
    bad = command.run_import(
        args("--token", "cad_wrong"),
        transport=through(client, []),
        mlflow_transport=recorded([]),
        sleep=pytest.fail,
    )
    assert bad == 4
    read_only = make_token(db, "read")
    assert (
        command.run_import(
            args("--token", read_only),
            transport=through(client, []),
            mlflow_transport=recorded([]),
            sleep=pytest.fail,
        )
        == 4
    )

    def down(request: httpx.Request) -> httpx.Response:
        return httpx.Response(503, json={"error": {"code": "unavailable", "message": "down"}})

    code = command.run_import(
        args("--token", "t"),
        transport=httpx.MockTransport(down),
        mlflow_transport=recorded([]),
        sleep=lambda _s: None,
    )
    assert code == 5
    assert "server unavailable" in capsys.readouterr().err


def test_a_changed_run_is_a_conflict_exit_3(
    client: TestClient, db: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    token = make_token(db, "ingest")
    assert (
        command.run_import(
            args("--token", token), transport=through(client, []), mlflow_transport=recorded([])
        )
        == 0
    )
    page1 = fixture("runs_search_page1.json")
    page1["runs"][0]["data"]["params"][0]["value"] = "16"  # workers changed in MLflow
    page1.pop("next_page_token")

    def changed(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("get-by-name"):
            return httpx.Response(200, json=fixture("experiments_get_by_name.json"))
        return httpx.Response(200, json=page1)

    code = command.run_import(
        args("--token", token),
        transport=through(client, []),
        mlflow_transport=httpx.MockTransport(changed),
        sleep=pytest.fail,
    )
    assert code == 3
    assert "conflict (409" in capsys.readouterr().err


def test_cli_registers_import_mlflow() -> None:
    namespace = args("--variant-tag", "arm", "--dry-run")
    assert (namespace.command, namespace.import_source) == ("import", "mlflow")
    assert namespace.variant_tag == "arm" and namespace.dry_run is True


# A real MLflow tracking server -------------------------------------------------------


def mlflow_bin() -> str | None:
    return os.environ.get("CADENCE_MLFLOW_BIN") or shutil.which("mlflow")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def mlflow_server(tmp_path: Path) -> Iterator[str]:
    binary = mlflow_bin()
    if binary is None:
        pytest.skip("no mlflow executable: set CADENCE_MLFLOW_BIN or put mlflow on PATH")
    port = free_port()
    uri = f"http://127.0.0.1:{port}"
    log = (tmp_path / "mlflow.log").open("w")
    proc = subprocess.Popen(
        [
            binary,
            "server",
            "--backend-store-uri",
            f"sqlite:///{tmp_path / 'mlflow.db'}",
            "--default-artifact-root",
            str(tmp_path / "artifacts"),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            "1",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                if httpx.get(f"{uri}/health", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                log.flush()
                pytest.fail(
                    f"mlflow server did not start:\n{(tmp_path / 'mlflow.log').read_text()}"
                )
            time.sleep(0.5)
        yield uri
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def test_against_a_real_mlflow_server(
    mlflow_server: str, client: TestClient, db: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    api = f"{mlflow_server}/api/2.0/mlflow"
    with httpx.Client(timeout=30) as http:

        def post(endpoint: str, body: dict[str, Any]) -> dict[str, Any]:
            answer = http.post(f"{api}/{endpoint}", json=body)
            assert answer.status_code == 200, answer.text
            return dict(answer.json())

        experiment = post("experiments/create", {"name": "cadence-real"})["experiment_id"]
        ids = []
        for i in range(3):
            start = T0 + i * 24 * H
            info = post(
                "runs/create",
                {"experiment_id": experiment, "start_time": start, "run_name": f"r{i}"},
            )["run"]["info"]
            post(
                "runs/log-batch",
                {
                    "run_id": info["run_id"],
                    "metrics": [
                        {"key": "gpu_util", "value": 40 + i, "timestamp": start, "step": 0},
                        {"key": "val_ndcg", "value": 0.4 + i / 100, "timestamp": start, "step": 0},
                    ],
                    "params": [{"key": "num_gpus", "value": str(2 * (i + 1))}],
                    "tags": [
                        {"key": "arm", "value": "candidate" if i else "baseline"},
                        {"key": "team", "value": "ranking"},
                    ],
                },
            )
            post(
                "runs/update",
                {"run_id": info["run_id"], "status": "FINISHED", "end_time": start + 5 * H},
            )
            ids.append(info["run_id"])

    mapping = Path(os.environ.get("TMPDIR", "/tmp")) / f"cadence-mlflow-{os.getpid()}.toml"
    mapping.write_text(
        'quality_metric = "ndcg@10"\nutilization_is_percent = true\n[fields]\n'
        'gpu_utilization = "metrics.gpu_util"\nworkers = "params.num_gpus"\n'
        'quality = "metrics.val_ndcg"\n'
    )
    try:
        argv = [
            "import",
            "mlflow",
            "--tracking-uri",
            mlflow_server,
            "--experiment",
            "cadence-real",
            "--pipeline",
            "mlflow-real",
            "--url",
            URL,
            "--token",
            make_token(db, "ingest"),
            "--mapping",
            str(mapping),
            "--variant-tag",
            "arm",
        ]
        for expected in ("3 created / 0 already there", "0 created / 3 already there"):
            code = command.run_import(
                cli.parser().parse_args(argv), transport=through(client, []), sleep=pytest.fail
            )
            out, err = capsys.readouterr()
            assert code == 0, err
            assert f"found 3, imported 3 ({expected}), skipped 0" in out
    finally:
        mapping.unlink(missing_ok=True)
    runs = stored(client, "mlflow-real")
    assert set(runs) == set(ids)
    for i, run_id in enumerate(ids):
        run = runs[run_id]
        assert run["workers"] == 2 * (i + 1)
        assert run["gpu_utilization"] == pytest.approx((40 + i) / 100)
        assert run["quality_value"] == pytest.approx(0.4 + i / 100)
        assert run["quality_metric"] == "ndcg@10"
        assert run["variant"] == ("candidate" if i else "baseline")
        assert run["wall_clock_hours"] == pytest.approx(5)
        assert run["tags"] == {"team": "ranking"}

    with pytest.raises(ExperimentNotFound), MlflowClient(mlflow_server) as mlflow:
        mlflow.experiment_id("does-not-exist")


def test_a_mapped_metric_history_becomes_evaluations(
    client: TestClient, db: Database, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mapping = tmp_path / "mapping.toml"
    mapping.write_text('evaluations = "metrics.live_quality"\n', encoding="utf-8")
    token = make_token(db, "ingest")
    argv = ("--token", token, "--mapping", str(mapping))
    code = command.run_import(
        args(*argv), transport=through(client, []), mlflow_transport=recorded([]), sleep=pytest.fail
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "evaluations: 3 (3 created / 0 already there)" in out  # the training-time one left out
    listed = client.get("/api/v1/pipelines/mlflow-ranker/evaluations").json()["evaluations"]
    assert sorted(e["age_weeks"] * 7 for e in listed) == pytest.approx([0, 1, 2])
    assert {e["run_id"] for e in listed} == {"a1f0c2d3e4b5a6978877665544332211"}
    again = command.run_import(
        args(*argv), transport=through(client, []), mlflow_transport=recorded([]), sleep=pytest.fail
    )
    assert again == 0 and "(0 created / 3 already there)" in capsys.readouterr().out


def test_evaluations_mapping_must_name_a_metric() -> None:
    with pytest.raises(MappingError, match=r"metrics\.KEY"):
        parse_mapping({"evaluations": "params.x"})


def test_a_one_gpu_job_on_a_four_gpu_node_reads_its_own_gpu() -> None:
    # MLflow's monitor logged all four GPUs of the host; the job ran on GPU 2 at 90%.
    metrics = {f"system/gpu_{i}_utilization_percentage": v for i, v in enumerate([0, 0, 90, 0])}
    metrics["system/gpu_utilization_percentage"] = 22.5  # the host's mean: (0+0+90+0)/4
    shared = mlflow_run(metrics=metrics, params={"workers": "1", "CUDA_VISIBLE_DEVICES": "2"})
    mapped = map_run(shared, "ranker", Mapping())
    assert mapped.payload is not None and mapped.payload["gpu_utilization"] == pytest.approx(0.90)
    assert mapped.note == ""  # CUDA_VISIBLE_DEVICES said which: nothing to note
    # Without CUDA_VISIBLE_DEVICES: the busiest series (the other three idle), noted.
    busiest = map_run(mlflow_run(metrics=metrics, params={"workers": "1"}), "ranker", Mapping())
    assert busiest.payload is not None
    assert busiest.payload["gpu_utilization"] == pytest.approx(0.90)  # not 0.225
    assert "took the busiest gpu_2" in busiest.note
    assert busiest.payload["tags"]["utilization_note"] == busiest.note


def test_a_shared_node_whose_other_gpus_are_busy_is_refused_with_a_note() -> None:
    # GPU 1 ran another job at 85%: "busiest" cannot tell the 1-GPU job's GPU apart.
    metrics = {f"system/gpu_{i}_utilization_percentage": v for i, v in enumerate([0, 85, 90, 0])}
    refused = map_run(mlflow_run(metrics=metrics, params={"workers": "1"}), "ranker", Mapping())
    assert refused.payload is None
    assert "4 GPU utilization series for 1 workers" in refused.reason
    assert "gpu_1 at 85% is busy too" in refused.reason
    # A failed attempt may go without utilization: imported, with none.
    failed = mlflow_run(status="FAILED", metrics=metrics, params={"workers": "1"})
    payload = map_run(failed, "ranker", Mapping()).payload
    assert payload is not None and "gpu_utilization" not in payload


def test_the_busiest_two_of_four_and_a_visible_list_that_names_no_series() -> None:
    # 2 workers on a 4-GPU host, GPUs at 3, 70, 2, 80 %: the busiest two, (70 + 80) / 2
    # = 75% -> 0.75; the idle ones (3 and 2, at most 5%) are the host's.
    metrics = {f"system/gpu_{i}_utilization_percentage": v for i, v in enumerate([3, 70, 2, 80])}
    two = map_run(mlflow_run(metrics=metrics, params={"workers": "2"}), "ranker", Mapping())
    assert two.payload is not None and two.payload["gpu_utilization"] == pytest.approx(0.75)
    assert "gpu_3, gpu_1" in two.note
    # CUDA_VISIBLE_DEVICES naming GPUs the monitor did not log is refused, not guessed.
    params = {"workers": "2", "CUDA_VISIBLE_DEVICES": "6,7"}
    stray = map_run(mlflow_run(metrics=metrics, params=params), "ranker", Mapping())
    assert stray.payload is None and "CUDA_VISIBLE_DEVICES=6,7 names none" in stray.reason


def test_per_node_keys_are_read_and_workers_inferred_from_the_series() -> None:
    # Two nodes x 1 GPU, no workers param: 2 workers; (60 + 80) / 2 = 70% -> 0.7.
    metrics = {
        "system/node_0/gpu_0_utilization_percentage": 60.0,
        "system/node_1/gpu_0_utilization_percentage": 80.0,
    }
    payload = map_run(mlflow_run(metrics=metrics, params={}), "ranker", Mapping()).payload
    assert payload is not None
    assert (payload["workers"], payload["gpu_utilization"]) == (2, pytest.approx(0.7))
