"""utilization_source: stored, returned, exported, shown, and warned about when mixed."""

from __future__ import annotations

import csv
import io

from fastapi.testclient import TestClient

from tests.fixtures.builders import make_run

PIPE = "src-pipe"


def post(client: TestClient, headers: dict[str, str], **fields: object) -> dict[str, object]:
    answer = client.post("/api/v1/runs", json=make_run(pipeline=PIPE, **fields), headers=headers)
    assert answer.status_code == 201, answer.text
    body: dict[str, object] = answer.json()
    return body


def test_stored_returned_and_refused_when_unknown(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    run = post(client, ingest_headers, run_id="a", utilization_source="dcgm_sm_active")
    assert run["utilization_source"] == "dcgm_sm_active"
    assert client.get(f"/api/v1/runs/{run['id']}").json()["utilization_source"] == (
        "dcgm_sm_active"
    )
    assert post(client, ingest_headers, run_id="b")["utilization_source"] is None
    bad = client.post(
        "/api/v1/runs",
        json=make_run(pipeline=PIPE, run_id="c", utilization_source="nvidia-smi"),
        headers=ingest_headers,
    )
    assert bad.status_code == 422
    [field] = bad.json()["error"]["fields"]
    assert field["field"] == "utilization_source"
    assert "nvml_gpu_util" in field["reason"]


def test_a_retry_with_another_source_is_a_conflict(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    post(client, ingest_headers, run_id="a", utilization_source="mfu")
    again = client.post(
        "/api/v1/runs",
        json=make_run(pipeline=PIPE, run_id="a", utilization_source="other"),
        headers=ingest_headers,
    )
    assert again.status_code == 409
    assert again.json()["error"]["fields"] == [
        {
            "field": "utilization_source",
            "reason": "the stored run has 'mfu'; this request sends 'other'",
        }
    ]
    # A field the retry leaves out is named as such, with the default it took.
    bare = make_run(pipeline=PIPE, run_id="a")  # no utilization_source
    left_out = client.post("/api/v1/runs", json=bare, headers=ingest_headers)
    [field] = left_out.json()["error"]["fields"]
    assert field["field"] == "utilization_source"
    assert field["reason"].startswith(
        "not sent, so it defaults to None, but the stored run has 'mfu'"
    )


def test_exported_in_the_csv_and_shown_in_the_run_table(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    post(client, ingest_headers, run_id="a", utilization_source="nvml_gpu_util")
    rows = list(csv.DictReader(io.StringIO(client.get(f"/pipelines/{PIPE}/runs.csv").text)))
    assert rows[0]["utilization_source"] == "nvml_gpu_util"
    page = client.get(f"/pipelines/{PIPE}").text
    assert '<span class="muted small" data-source>nvml_gpu_util</span>' in page


def test_the_gate_and_the_trend_warn_when_sources_differ(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    for i in range(3):
        day = f"2026-11-0{2 + i}"
        post(
            client, ingest_headers, run_id=f"b{i}", utilization_source="nvml_gpu_util",
            started_at=f"{day}T08:00:00+00:00", finished_at=f"{day}T22:00:00+00:00",
        )  # fmt: skip
        post(
            client, ingest_headers, run_id=f"c{i}", variant="candidate",
            utilization_source="dcgm_sm_active", gpu_utilization=0.7,
            started_at=f"{day}T09:00:00+00:00", finished_at=f"{day}T21:00:00+00:00",
        )  # fmt: skip
    gate = client.get(f"/api/v1/pipelines/{PIPE}/gate", params={"budget": 100000}).json()
    [warning] = gate["warnings"]
    assert "dcgm_sm_active (3 runs), nvml_gpu_util (3 runs)" in warning
    # The trend is one variant's (production's, by default): each variant's runs share
    # one source, so only the gate, which compares the two, warns.
    trend = client.get(f"/api/v1/pipelines/{PIPE}/goodput").json()
    assert trend["warnings"] == []
    page = client.get(f"/pipelines/{PIPE}", params={"budget": 100000}).text
    assert page.count('data-warning="utilization-source"') == 1
    # A production run measured by another metric makes the trend warn, API and page.
    post(
        client, ingest_headers, run_id="b9", utilization_source="dcgm_sm_active",
        started_at="2026-11-05T08:00:00+00:00", finished_at="2026-11-05T22:00:00+00:00",
    )  # fmt: skip
    trend = client.get(f"/api/v1/pipelines/{PIPE}/goodput").json()
    [trend_warning] = trend["warnings"]
    assert trend_warning.startswith("The goodput trend compares runs whose utilization")
    page = client.get(f"/pipelines/{PIPE}", params={"budget": 100000}).text
    assert page.count('data-warning="utilization-source"') == 2


def test_no_warning_when_every_run_says_the_same(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    for i in range(3):
        post(client, ingest_headers, run_id=f"b{i}", utilization_source="mfu")
        post(client, ingest_headers, run_id=f"c{i}", variant="candidate", utilization_source="mfu")
    gate = client.get(f"/api/v1/pipelines/{PIPE}/gate", params={"budget": 100000}).json()
    assert gate["warnings"] == []
    assert client.get(f"/api/v1/pipelines/{PIPE}/goodput").json()["warnings"] == []
