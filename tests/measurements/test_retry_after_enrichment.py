"""A run posted again as first sent, after enrichment changed its measurements, is the same
run (issue 36 item 4); the measurement audit has a read endpoint (item 9)."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.fixtures.builders import make_run

ONE = "/api/v1/pipelines/ranker/runs/run-0/measurements"
ENRICHED = {"gpu_utilization": 0.55, "utilization_source": "dcgm_gr_engine_active"}


def _enriched(client: TestClient, headers: dict[str, str]) -> dict[str, object]:
    run = make_run(run_id="run-0")
    assert client.post("/api/v1/runs", json=run, headers=headers).status_code == 201
    assert client.patch(ONE, json=ENRICHED, headers=headers).status_code == 200
    return run


def test_a_retry_as_first_sent_after_enrichment_is_the_same_run(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    run = _enriched(client, ingest_headers)
    again = client.post("/api/v1/runs", json=run, headers=ingest_headers)
    assert again.status_code == 200, again.text  # was a 409 naming gpu_utilization
    assert again.json()["gpu_utilization"] == 0.55  # the enriched value stays
    batch = client.post("/api/v1/runs/batch", json={"runs": [run]}, headers=ingest_headers)
    assert batch.status_code == 200 and batch.json()["existing"] == 1


def test_a_retry_that_changes_anything_else_is_still_a_conflict(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    run = _enriched(client, ingest_headers)
    changed = {**run, "workers": 4, "mfu": 0.3}  # mfu was never enriched: a conflict too
    answer = client.post("/api/v1/runs", json=changed, headers=ingest_headers)
    assert answer.status_code == 409
    fields = {f["field"] for f in answer.json()["error"]["fields"]}
    assert fields == {"workers", "gpu_hours", "mfu"}  # gpu_hours follows the workers


def test_the_measurement_audit_reads_back(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    _enriched(client, ingest_headers)
    url = "/api/v1/pipelines/ranker/runs/run-0/measurement-changes"
    answer = client.get(url, headers=ingest_headers)
    assert answer.status_code == 200, answer.text
    changes = answer.json()["changes"]
    first = changes[0]
    assert (first["field"], first["old_value"], first["new_value"]) == ("gpu_utilization",
                                                                        "0.38", "0.55")  # fmt: skip
    assert {c["field"] for c in changes} == {"gpu_utilization", "utilization_source"}
    missing = client.get(url.replace("run-0", "nope"), headers=ingest_headers)
    assert missing.status_code == 404
