"""The cost basis is 'expected_bill' or 'p90'; 'median', its old name, is a 422 that names
the new one wherever a basis is given (app/planning/cost_basis.py)."""

from __future__ import annotations

from fastapi.testclient import TestClient

from tests.fixtures.builders import make_run

NEW_WORD = "'median' is now called 'expected_bill'"


def test_the_new_word_is_stored_and_echoed(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    body = {"gate_cost_basis": "expected_bill"}
    r = client.put("/api/v1/pipelines/basis", json=body, headers=admin_headers)
    assert r.status_code == 200, r.text
    assert r.json()["gate_cost_basis"] == "expected_bill"


def test_the_old_word_is_refused_naming_the_new_one(
    client: TestClient, admin_headers: dict[str, str], ingest_headers: dict[str, str]
) -> None:
    r = client.put(
        "/api/v1/pipelines/basis", json={"gate_cost_basis": "median"}, headers=admin_headers
    )
    assert r.status_code == 422, r.text
    [error] = r.json()["error"]["fields"]
    assert error["field"] == "gate_cost_basis" and NEW_WORD in error["reason"], error
    assert client.get("/api/v1/pipelines/basis").status_code == 404  # nothing written

    run = make_run(pipeline="basis")
    assert client.post("/api/v1/runs", json=run, headers=ingest_headers).status_code == 201
    r = client.get("/api/v1/pipelines/basis/gate", params={"cost_basis": "median"})
    assert r.status_code == 422, r.text
    [error] = r.json()["error"]["fields"]
    assert error["field"] == "cost_basis" and NEW_WORD in error["reason"], error
