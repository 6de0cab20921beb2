"""The measurements endpoint: a stored run's utilization, its source, MFU, stall and
checkpoint hours change after ingest, audited, with the rollups in step; all or nothing."""

from __future__ import annotations

import math
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.db import rollup
from app.db.engine import Database
from app.measurements import repository
from app.planning.rollup import KEY, SUMS
from tests.fixtures.builders import make_run, make_token

ONE = "/api/v1/pipelines/ranker/runs/{run_id}/measurements"
BATCH = "/api/v1/pipelines/ranker/measurements"


def stored(client: TestClient, ingest_headers: dict[str, str], n: int = 2) -> list[dict[str, Any]]:
    runs = [make_run(run_id=f"run-{i}") for i in range(n)]
    answer = client.post("/api/v1/runs/batch", json={"runs": runs}, headers=ingest_headers)
    assert answer.status_code == 201, answer.text
    return [client.get(f"/api/v1/runs/{item['id']}").json() for item in answer.json()["runs"]]


def assert_rollups_match(db: Database) -> None:
    """The rollups kept equal a recomputation from the runs (the property test in
    tests/db/test_rollups.py checks more readers; this is the part a change touches)."""
    with db.read() as s:
        kept, fresh = rollup.stored(s), rollup.recompute(s)
        assert [[r[k] for k in KEY] for r in kept] == [[r[k] for k in KEY] for r in fresh]
        for a, b in zip(kept, fresh, strict=True):
            assert a["runs"] == b["runs"]
            wrong = [n for n in SUMS if not math.isclose(a[n], b[n], rel_tol=1e-6, abs_tol=1e-6)]
            assert not wrong, (a, b, wrong)
        expected, held = rollup.variant_counts(s)
        assert held == expected


def idle_gpu_hours(db: Database) -> float:
    with db.read() as s:
        return sum(r["g_idle"] for r in rollup.stored(s))


def test_patch_changes_the_fields_sent_audits_them_and_moves_the_rollups(
    client: TestClient, db: Database, ingest_headers: dict[str, str]
) -> None:
    first, _ = stored(client, ingest_headers)
    # Two runs of 8 workers x 14 h = 112 GPU-hours each at 38%: idle (1 - 0.38) x 112 x 2
    # = 138.88 GPU-hours. At 55% for the first: 0.62 x 112 + 0.45 x 112 = 119.84.
    assert idle_gpu_hours(db) == pytest.approx(138.88)
    body = {"gpu_utilization": 0.55, "utilization_source": "dcgm_gr_engine_active"}
    answer = client.patch(ONE.format(run_id="run-0"), json=body, headers=ingest_headers)
    assert answer.status_code == 200, answer.text
    assert answer.json() == {
        "updated": 1,
        "unchanged": 0,
        "runs": [
            {"id": first["id"], "run_id": "run-0", "changed": list(body)},
        ],
    }
    run = client.get(f"/api/v1/runs/{first['id']}").json()
    assert (run["gpu_utilization"], run["utilization_source"]) == (0.55, "dcgm_gr_engine_active")
    assert run["mfu"] is None and run["data_stall_hours"] == 5.0  # not sent: kept
    assert idle_gpu_hours(db) == pytest.approx(119.84)
    assert_rollups_match(db)
    with db.read() as s:
        audit = [
            (c.field, c.old_value, c.new_value, c.changed_by)
            for c in repository.changes_of(s, first["id"])
        ]
    assert audit == [
        ("gpu_utilization", "0.38", "0.55", "test-ingest"),
        ("utilization_source", None, "dcgm_gr_engine_active", "test-ingest"),
    ]


def test_the_same_values_again_change_nothing(
    client: TestClient, db: Database, ingest_headers: dict[str, str]
) -> None:
    first, _ = stored(client, ingest_headers)
    body = {"gpu_utilization": 0.38, "checkpoint_hours": 1.0}
    answer = client.patch(ONE.format(run_id="run-0"), json=body, headers=ingest_headers)
    assert answer.json()["updated"] == 0 and answer.json()["unchanged"] == 1
    with db.read() as s:
        assert repository.changes_of(s, first["id"]) == []


def test_batch_changes_several_runs_in_one_transaction(
    client: TestClient, db: Database, ingest_headers: dict[str, str]
) -> None:
    stored(client, ingest_headers, n=3)
    runs = [
        {"run_id": "run-0", "gpu_utilization": 0.5, "mfu": 0.3},
        {"run_id": "run-2", "data_stall_hours": 2.0},
    ]
    answer = client.post(BATCH, json={"runs": runs}, headers=ingest_headers)
    assert answer.status_code == 200, answer.text
    assert answer.json()["updated"] == 2
    assert_rollups_match(db)


@pytest.mark.parametrize(
    ("body", "field", "reason"),
    [
        ({"workers": 4}, "workers", "unknown field"),
        (
            {"gpu_utilization": 38},
            "gpu_utilization",
            "38 looks like a percentage: did you mean 0.38?",
        ),
        ({}, "body", "give at least one of gpu_utilization"),
        # 14 h run with 1 h of checkpoints and 1 h of interruption time: 13 h of stall
        # makes 15 h > 14 h.
        ({"data_stall_hours": 13}, "data_stall_hours", "is longer than the run (14 h)"),
        ({"data_stall_hours": None}, "data_stall_hours", "must be a number of hours"),
    ],
)
def test_bad_fields_are_422_naming_them_and_change_nothing(
    client: TestClient,
    ingest_headers: dict[str, str],
    body: dict[str, Any],
    field: str,
    reason: str,
) -> None:
    first, _ = stored(client, ingest_headers)
    answer = client.patch(ONE.format(run_id="run-0"), json=body, headers=ingest_headers)
    assert answer.status_code == 422, answer.text
    fields = answer.json()["error"]["fields"]
    assert any(f["field"].endswith(field) and reason in f["reason"] for f in fields), fields
    assert client.get(f"/api/v1/runs/{first['id']}").json() == first


def test_a_batch_with_an_unknown_run_changes_nothing(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    first, _ = stored(client, ingest_headers)
    runs = [{"run_id": "run-0", "gpu_utilization": 0.9}, {"run_id": "nope", "mfu": 0.2}]
    answer = client.post(BATCH, json={"runs": runs}, headers=ingest_headers)
    assert answer.status_code == 422
    assert answer.json()["error"]["fields"] == [
        {"field": "runs.1.run_id", "reason": "no such run in pipeline 'ranker'"}
    ]
    assert client.get(f"/api/v1/runs/{first['id']}").json()["gpu_utilization"] == 0.38


def test_unknown_run_or_pipeline_is_404(client: TestClient, ingest_headers: dict[str, str]) -> None:
    stored(client, ingest_headers)
    body = {"mfu": 0.2}
    assert (
        client.patch(ONE.format(run_id="nope"), json=body, headers=ingest_headers).status_code
        == 404
    )
    other = "/api/v1/pipelines/absent/runs/run-0/measurements"
    assert client.patch(other, json=body, headers=ingest_headers).status_code == 404


def test_scopes_and_pipeline_limits(
    client: TestClient, db: Database, ingest_headers: dict[str, str]
) -> None:
    stored(client, ingest_headers)
    url, body = ONE.format(run_id="run-0"), {"mfu": 0.2}
    assert client.patch(url, json=body).status_code == 401
    read = {"Authorization": f"Bearer {make_token(db, 'read')}"}
    assert client.patch(url, json=body, headers=read).status_code == 403
    elsewhere = make_token(db, "ingest", name="other-team", pipelines=["vision"])
    limited = {"Authorization": f"Bearer {elsewhere}"}
    assert client.patch(url, json=body, headers=limited).status_code == 403
    admin = {"Authorization": f"Bearer {make_token(db, 'admin')}"}
    assert client.patch(url, json=body, headers=admin).status_code == 200
