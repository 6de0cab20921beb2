from __future__ import annotations

import json
import re

import pytest
from fastapi.testclient import TestClient

from tests.fixtures.builders import make_run


def test_put_creates_and_updates(client: TestClient, admin_headers: dict[str, str]) -> None:
    body = {
        "display_name": "Ranker",
        "price_per_gpu_hour": 3.0,
        "monthly_budget_usd": 1400,
        "runs_per_week": 2,
        "quality_metric": "ndcg@10",
        "higher_is_better": True,
    }
    r = client.put("/api/v1/pipelines/ranker", json=body, headers=admin_headers)
    assert r.status_code == 200, r.text
    assert r.json()["runs_per_week"] == 2
    r = client.put(
        "/api/v1/pipelines/ranker", json={"price_per_gpu_hour": 2.0}, headers=admin_headers
    )
    got = r.json()
    assert (got["price_per_gpu_hour"], got["monthly_budget_usd"], got["display_name"]) == (
        2.0,
        1400,
        "Ranker",
    )
    listed = client.get("/api/v1/pipelines").json()["pipelines"]
    assert [p["name"] for p in listed] == ["ranker"]


def test_put_needs_admin_and_valid_values(
    client: TestClient, ingest_headers: dict[str, str], admin_headers: dict[str, str]
) -> None:
    assert client.put("/api/v1/pipelines/x", json={}, headers=ingest_headers).status_code == 403
    assert client.put("/api/v1/pipelines/x", json={}).status_code == 401
    r = client.put("/api/v1/pipelines/x", json={"runs_per_week": 0}, headers=admin_headers)
    assert r.status_code == 422
    assert r.json()["error"]["fields"][0]["field"] == "runs_per_week"
    r = client.put("/api/v1/pipelines/Bad%20Name", json={}, headers=admin_headers)
    assert r.status_code == 422
    assert r.json()["error"]["fields"][0]["field"] == "name"


def test_pipeline_price_change_reprices_projections_never_recorded_spend(
    client: TestClient, ingest_headers: dict[str, str], admin_headers: dict[str, str]
) -> None:
    # Issue 12, bug 6. The run (112 GPU-h, no price of its own) is stored while the
    # pipeline charges $2.50: its cost is frozen at 112 x 2.5 = $280.
    run = make_run()
    run.pop("price_per_gpu_hour", None)
    pk = client.post("/api/v1/runs", json=run, headers=ingest_headers).json()["id"]
    assert client.get(f"/api/v1/runs/{pk}").json()["cost_usd"] == 280.0
    client.put("/api/v1/pipelines/ranker", json={"price_per_gpu_hour": 3.0}, headers=admin_headers)
    # Recorded spend does not move: still $280, in the run and in the weekly totals.
    assert client.get(f"/api/v1/runs/{pk}").json()["cost_usd"] == 280.0
    weeks = client.get("/api/v1/pipelines/ranker/goodput", params={"weeks": 1}).json()
    assert weeks["weeks"][-1]["cost_usd"] == pytest.approx(280.0)
    # The projection is re-priced: 1 run/week x 52/12 x 112 x $3 = $1,456 a month.
    proj = client.get("/api/v1/pipelines/ranker/projection", params={"cadences": "1"}).json()
    assert proj["projections"]["baseline"]["cadences"][0]["monthly_cost_usd"] == pytest.approx(
        52 / 12 * 336.0
    )


def test_unknown_pipeline_404(client: TestClient) -> None:
    r = client.get("/api/v1/pipelines/nope")
    assert r.status_code == 404
    assert "nope" in r.json()["error"]["message"]


def test_health(client: TestClient) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz")
    assert ready.status_code == 200
    assert ready.json()["database"] == "ok"


def test_openapi_documents_ingestion(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    assert "/api/v1/runs" in spec["paths"]
    assert client.get("/docs").status_code == 200


def test_openapi_request_bodies_resolve(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    text = json.dumps(spec)
    assert "#/$defs/" not in text  # every $ref points into components
    for ref in re.findall(r'"\$ref": "#/components/schemas/([^"]+)"', text):
        assert ref in spec["components"]["schemas"], ref
    body = spec["paths"]["/api/v1/runs"]["post"]["requestBody"]["content"]["application/json"]
    assert "gpu_utilization" in body["schema"]["properties"]
    # Optional since attempts: a crashed job may never have measured it.
    assert "gpu_utilization" not in body["schema"]["required"]
    assert "workers" in body["schema"]["required"]
    batch = spec["paths"]["/api/v1/runs/batch"]["post"]["requestBody"]["content"]
    items = batch["application/json"]["schema"]["properties"]["runs"]["items"]
    assert "interruptions" in items["properties"]


def test_the_list_pages_with_a_cursor_and_says_its_total(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    for name in ("page-c", "page-a", "page-b"):
        assert client.put(f"/api/v1/pipelines/{name}", json={}, headers=admin_headers).is_success
    first = client.get("/api/v1/pipelines?limit=2", headers=admin_headers).json()
    assert [p["name"] for p in first["pipelines"]] == ["page-a", "page-b"]
    assert first["total"] == 3 and first["next_cursor"]
    rest = client.get(
        f"/api/v1/pipelines?limit=2&cursor={first['next_cursor']}", headers=admin_headers
    ).json()
    assert [p["name"] for p in rest["pipelines"]] == ["page-c"]
    assert rest["total"] == 3 and rest["next_cursor"] is None
    bad = client.get("/api/v1/pipelines?cursor=%%%", headers=admin_headers)
    assert bad.status_code == 422 and "cursor" in bad.text
