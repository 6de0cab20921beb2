"""The client package against this server, through the app in-process (the fresh
virtualenvs of ``pip install ./clients/python`` and ``pip install .``:
tests/system/test_one_install.py)."""

from __future__ import annotations

import pytest
from cadence_client import CadenceClient, ConflictError, ValidationFailed
from fastapi.testclient import TestClient

from app.db.engine import Database
from app.settings import PROJECT_ROOT
from tests.fixtures.builders import make_run, make_token
from tests.fixtures.client import through

CLIENT_SOURCE = PROJECT_ROOT / "clients" / "python"


def test_against_the_real_app(client: TestClient, db: Database) -> None:
    statuses: list[int] = []
    token = make_token(db, "ingest")
    run = make_run(pipeline="client-test", run_id="client-1")
    transport = through(client, statuses)
    with CadenceClient(
        "http://testserver", token, transport=transport, sleep=pytest.fail
    ) as cadence:
        assert cadence.health() is True
        first = cadence.post_run(run)
        again = cadence.post_run(run)
        assert first["id"] == again["id"]
        assert first["gpu_hours"] == pytest.approx(112)
        assert statuses[-2:] == [201, 200]

        with pytest.raises(ValidationFailed) as info:
            cadence.post_run({**run, "run_id": "client-bad", "gpu_utilization": 38})
        assert info.value.status == 422
        assert info.value.url == "http://testserver/api/v1/runs"
        assert [f["field"] for f in info.value.fields] == ["gpu_utilization"]
        assert "0.38" in info.value.fields[0]["reason"]

        with pytest.raises(ConflictError):
            cadence.post_run({**run, "workers": 16})

        batch = [make_run(pipeline="client-test", run_id=f"client-b{i}") for i in range(3)]
        result = cadence.post_runs([run, *batch], batch_size=2)
        assert (result.created, result.existing, result.batches) == (3, 1, 2)
        assert result.ids[0] == first["id"]

        listed = list(cadence.list_runs(pipeline="client-test", limit=1))
        assert sorted(r["run_id"] for r in listed) == [
            "client-1",
            "client-b0",
            "client-b1",
            "client-b2",
        ]
        assert "client-test" in [p["name"] for p in cadence.list_pipelines()]
    assert statuses.count(422) == 1 and statuses.count(409) == 1  # neither was retried
