"""``cadence enrich prometheus``: the query and the choice (pure), then a real Prometheus
scraping a fake DCGM exporter (tests/fixtures/dcgm.py) enriching runs stored in the
in-process app, checked against the values the exporter serves."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from app import cli
from app.db.engine import Database
from app.sources import enrich_command
from app.sources.prometheus import (
    TemplateError,
    check_template,
    choice,
    exported,
    matcher,
    means,
    query,
)
from tests.fixtures.builders import make_run, make_token
from tests.fixtures.client import through
from tests.fixtures.dcgm import Gpu, Stack, prometheus_stack
from tests.fixtures.serving import free_port

URL = "http://testserver"
MATCH = 'pod=~"{run_id}-worker-.*", namespace="{namespace}"'
GPUS = [
    # ranker-a: profiling on; (0.6 + 0.4) / 2 = 0.5 engine-active.
    Gpu("ranker-a-worker-0", 0, util=80, profiling=0.6),
    Gpu("ranker-a-worker-1", 1, util=70, profiling=0.4),
    # ranker-b: the silent zero: profiling 0 while GPU_UTIL (90 + 70) / 2 = 80 % -> 0.8.
    Gpu("ranker-b-worker-0", 0, util=90, profiling=0.0),
    Gpu("ranker-b-worker-1", 1, util=70, profiling=0.0),
    # ranker-c: profiling off on this exporter: GPU_UTIL 45 % -> 0.45.
    Gpu("ranker-c-worker-0", 0, util=45, profiling=None),
]


@pytest.fixture(scope="module")
def dcgm_prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with prometheus_stack(GPUS, tmp_path_factory.mktemp("prometheus")) as stack:
        yield stack


def test_matcher_fills_placeholders_and_escapes_values() -> None:
    run = {"run_id": 'x"}or{', "pipeline": "ranker", "tags": {"namespace": "ml"}}
    assert matcher(MATCH, run) == 'pod=~"x\\"}or{-worker-.*", namespace="ml"'
    with pytest.raises(KeyError, match="namespace"):
        matcher(MATCH, {"run_id": "r", "pipeline": "p", "tags": {}})
    with pytest.raises(TemplateError, match="without its own braces"):
        check_template('{pod="x"}')


def test_one_query_asks_for_both_metrics_per_gpu_as_written_or_exported() -> None:
    assert query('job="dcgm"') == (
        'label_replace(DCGM_FI_PROF_GR_ENGINE_ACTIVE{job="dcgm"}, "cadence_metric", '
        '"profiling", "", "") or label_replace(DCGM_FI_DEV_GPU_UTIL{job="dcgm"}, '
        '"cadence_metric", "gpu_util", "", "")'
    )
    # honorLabels: false (dcgm-exporter's Helm default) stores the workload's pod as
    # exported_pod: both spellings are asked for, whichever the site has.
    assert exported('pod=~"a-.*", namespace="ml", job="dcgm"') == (
        'exported_pod=~"a-.*", exported_namespace="ml", job="dcgm"'
    )
    assert query('pod="a"').startswith(
        'label_replace((DCGM_FI_PROF_GR_ENGINE_ACTIVE{pod="a"} or '
        'DCGM_FI_PROF_GR_ENGINE_ACTIVE{exported_pod="a"}), "cadence_metric", "profiling"'
    )


def gpu_series(metric: str, gpu: int, values: list[float]) -> dict[str, Any]:
    labels = {"cadence_metric": metric, "UUID": f"GPU-{gpu}", "exported_pod": "a-0"}
    return {"metric": labels, "values": [[i, str(v)] for i, v in enumerate(values)]}


def test_a_silent_zero_on_one_gpu_of_two_is_caught_and_flagged() -> None:
    data = {"result": [
        gpu_series("profiling", 0, [0.8, 0.8]), gpu_series("gpu_util", 0, [85, 85]),
        gpu_series("profiling", 1, [0.0, 0.0]), gpu_series("gpu_util", 1, [90, 90]),
    ]}  # fmt: skip
    picked = choice(data, expected_points=2)
    # GPU 0: 0.80 engine-active; GPU 1 silently 0 while busy 90 %: 0.90. (0.8 + 0.9) / 2.
    assert (picked.utilization, picked.source) == (pytest.approx(0.85), "dcgm_gpu_util")
    assert "about 0 on 1 of 2 GPUs" in picked.note  # not the 0.40 of the averaged series


def test_series_covering_half_the_run_are_flagged() -> None:
    data = {"result": [gpu_series("profiling", 0, [0.6] * 5)]}
    # 5 of the 10 points of the window: 50 % < 90 %: stored with a note.
    picked = choice(data, expected_points=10)
    assert picked.utilization == pytest.approx(0.6)
    assert "cover 50% of the run's wall clock" in picked.note
    assert choice(data, expected_points=5).note == ""  # whole: no note


def test_means_of_a_query_range_answer() -> None:
    # The shape /api/v1/query_range answers with (resultType matrix, values as text).
    data = {
        "resultType": "matrix",
        "result": [
            {"metric": {"cadence_metric": "profiling"}, "values": [[1, "0.4"], [2, "0.6"]]},
            {"metric": {"cadence_metric": "gpu_util"}, "values": [[1, "80"], [2, "90"]]},
        ],
    }
    # (0.4 + 0.6) / 2 = 0.5 and (80 + 90) / 2 = 85.
    assert means(data) == (pytest.approx(0.5), pytest.approx(85.0))


def args(stack_url: str, *argv: str) -> Any:
    flags = ["--prometheus-url", stack_url, "--match", MATCH, "--url", URL]
    return cli.parser().parse_args(["enrich", "prometheus", *flags, *argv])


def store_runs(
    client: TestClient, headers: dict[str, str], utilization: float | None = None
) -> None:
    """Runs over the last 3 s (the exporter has been scraped for longer), stored without
    utilization (or with it, to see --overwrite)."""
    end = datetime.now(UTC).replace(microsecond=0)
    start = end - timedelta(seconds=3)
    base = {
        "pipeline": "dcgm-test",
        "started_at": start.isoformat(),
        "finished_at": end.isoformat(),
        "workers": 2,
        "gpu_utilization": utilization,
        "data_stall_hours": 0.0,
        "checkpoint_hours": 0.0,
        "interruptions": [],
        "tags": {"namespace": "ml"},
    }
    runs = [make_run(**base, run_id=r) for r in ("ranker-a", "ranker-b", "ranker-c", "ranker-d")]
    runs.append(make_run(**{**base, "tags": {}}, run_id="ranker-e"))
    answer = client.post("/api/v1/runs/batch", json={"runs": runs}, headers=headers)
    assert answer.status_code == 201, answer.text


def stored(client: TestClient) -> dict[str, tuple[float, str | None]]:
    runs = client.get("/api/v1/runs", params={"pipeline": "dcgm-test"}).json()["runs"]
    return {r["run_id"]: (r["gpu_utilization"], r["utilization_source"]) for r in runs}


def test_enrich_from_a_real_prometheus(
    dcgm_prometheus: Stack,
    client: TestClient,
    db: Database,
    capsys: pytest.CaptureFixture[str],
) -> None:
    token = make_token(db, "ingest")
    store_runs(client, {"Authorization": f"Bearer {token}"})
    code = enrich_command.run_enrich(
        args(dcgm_prometheus.url, "--token", token), transport=through(client, [])
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    values = stored(client)
    assert values["ranker-a"] == (pytest.approx(0.5), "dcgm_gr_engine_active")
    assert values["ranker-b"] == (pytest.approx(0.8), "dcgm_gpu_util")
    assert values["ranker-c"] == (pytest.approx(0.45), "dcgm_gpu_util")
    assert values["ranker-d"] == (None, None)  # no series: left unknown, and listed
    assert values["ranker-e"] == (None, None)
    assert "not enriched: run ranker-d: no DCGM series in the run's window" in err
    assert "not enriched: run ranker-e: --match needs tag 'namespace'; the run has none" in err
    assert "note: run ranker-b: DCGM_FI_PROF_GR_ENGINE_ACTIVE reads about 0 on 2 of 2 GPUs" in err
    assert "enriched 3 runs (0 already had these values), 2 not enriched" in out
    # Again: only the two unread runs lack utilization; with --overwrite the same values
    # come back and nothing changes.
    again = enrich_command.run_enrich(
        args(dcgm_prometheus.url, "--token", token), transport=through(client, [])
    )
    assert again == 0
    assert "2 stored runs to enrich" in capsys.readouterr().err
    again = enrich_command.run_enrich(
        args(dcgm_prometheus.url, "--overwrite", "--token", token),
        transport=through(client, []),
    )
    assert again == 0
    assert "enriched 0 runs (3 already had these values)" in capsys.readouterr().out


def test_without_overwrite_runs_with_utilization_are_left_alone(
    dcgm_prometheus: Stack, client: TestClient, db: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    token = make_token(db, "ingest")
    store_runs(client, {"Authorization": f"Bearer {token}"}, utilization=0.1)
    code = enrich_command.run_enrich(
        args(dcgm_prometheus.url, "--token", token), transport=through(client, [])
    )
    assert code == 0
    assert "0 stored runs to enrich" in capsys.readouterr().err
    assert stored(client)["ranker-a"] == (0.1, None)


def test_dry_run_shows_the_changes_and_posts_nothing(
    dcgm_prometheus: Stack, client: TestClient, db: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    token = make_token(db, "ingest")
    store_runs(client, {"Authorization": f"Bearer {token}"}, utilization=0.1)
    code = enrich_command.run_enrich(
        args(dcgm_prometheus.url, "--overwrite", "--dry-run"), transport=through(client, [])
    )
    out, _ = capsys.readouterr()
    assert code == 0
    assert "ranker-a" in out and " 0.100  0.500 dcgm_gr_engine_active" in out
    assert "dry run: 3 would change, 2 not; nothing posted" in out
    assert stored(client)["ranker-a"] == (0.1, None)


def test_unreachable_prometheus_exits_2_naming_it(
    client: TestClient, db: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    token = make_token(db, "ingest")
    store_runs(client, {"Authorization": f"Bearer {token}"})
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    code = enrich_command.run_enrich(
        args(url, "--overwrite", "--token", token), transport=through(client, [])
    )
    assert code == 2
    assert f"Prometheus unreachable at {url}" in capsys.readouterr().err


def test_refused_prometheus_credentials_exit_2(
    client: TestClient, db: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    token = make_token(db, "ingest")
    store_runs(client, {"Authorization": f"Bearer {token}"})
    refusing = httpx.MockTransport(lambda request: httpx.Response(401, text="unauthorized"))
    code = enrich_command.run_enrich(
        args("http://prometheus.test:9090", "--overwrite", "--token", token),
        transport=through(client, []),
        prometheus_transport=refusing,
    )
    assert code == 2
    assert "refused the credentials (401)" in capsys.readouterr().err


def test_enrich_through_exported_pod_labels(
    tmp_path_factory: pytest.TempPathFactory,
    client: TestClient,
    db: Database,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The Helm chart's honorLabels: false: the workload's pod is exported_pod; the
    documented pod=~ matcher finds it all the same."""
    work = tmp_path_factory.mktemp("prometheus-exported")
    with prometheus_stack(GPUS, work, honor_labels=False) as stack:
        token = make_token(db, "ingest")
        store_runs(client, {"Authorization": f"Bearer {token}"})
        code = enrich_command.run_enrich(
            args(stack.url, "--token", token), transport=through(client, [])
        )
    out, err = capsys.readouterr()
    assert code == 0, err
    values = stored(client)
    assert values["ranker-a"] == (pytest.approx(0.5), "dcgm_gr_engine_active")  # (0.6+0.4)/2
    assert values["ranker-b"] == (pytest.approx(0.8), "dcgm_gpu_util")
    assert "enriched 3 runs" in out
