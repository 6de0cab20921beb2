"""The OpenAPI document: the bearer scheme, the documented error body (checked against
real error answers), and examples."""

from __future__ import annotations

from typing import Any

import jsonschema_rs
import pytest
from fastapi.testclient import TestClient

from tests.fixtures.builders import make_run


@pytest.fixture
def spec(client: TestClient) -> dict[str, Any]:
    document: dict[str, Any] = client.get("/openapi.json").json()
    return document


def documented(spec: dict[str, Any], path: str, method: str, status: str) -> dict[str, Any]:
    """The JSON schema documented for one answer, with the document's components so that
    its ``#/components/...`` references resolve."""
    content = spec["paths"][path][method]["responses"][status]["content"]["application/json"]
    return {**content["schema"], "components": spec["components"]}


def test_bearer_scheme_for_the_authorize_button(spec: dict[str, Any]) -> None:
    assert spec["components"]["securitySchemes"]["bearerAuth"] == {
        "type": "http",
        "scheme": "bearer",
        "description": spec["components"]["securitySchemes"]["bearerAuth"]["description"],
    }
    post = spec["paths"]["/api/v1/runs"]["post"]
    assert post["security"] == [{"bearerAuth": []}]
    assert all(p["name"].lower() != "authorization" for p in post.get("parameters", []))
    # Reads: a token only in token read-access mode, so the scheme is optional.
    assert spec["paths"]["/api/v1/runs"]["get"]["security"] == [{"bearerAuth": []}, {}]


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("post", "/api/v1/runs", "422"),
        ("post", "/api/v1/runs", "401"),
        ("get", "/api/v1/pipelines/{name}/projection", "404"),
        ("get", "/api/v1/runs", "422"),
        ("get", "/api/v1/runs", "404"),  # ?pipeline= names one that does not exist
    ],
)
def test_every_documented_error_is_the_real_error_body(
    spec: dict[str, Any], method: str, path: str, status: str
) -> None:
    schema = documented(spec, path, method, status)
    assert schema["$ref"] == "#/components/schemas/ErrorResponse"
    example = spec["paths"][path][method]["responses"][status]["content"]["application/json"]
    jsonschema_rs.validate(schema, example["example"])


def test_real_error_answers_match_the_documented_schema(
    client: TestClient, spec: dict[str, Any], ingest_headers: dict[str, str]
) -> None:
    bad = client.post(
        "/api/v1/runs", json=make_run(gpu_utilization=38, workers=0), headers=ingest_headers
    )
    unauthorized = client.post("/api/v1/runs", json=make_run())
    missing = client.get("/api/v1/pipelines/no-such-pipeline/projection")
    bad_query = client.get("/api/v1/runs", params={"limit": "lots"})
    unknown = client.get("/api/v1/runs", params={"pipeline": "no-such-pipeline"})
    answers = [
        (bad, "post", "/api/v1/runs", "422"),
        (unauthorized, "post", "/api/v1/runs", "401"),
        (missing, "get", "/api/v1/pipelines/{name}/projection", "404"),
        (bad_query, "get", "/api/v1/runs", "422"),
        (unknown, "get", "/api/v1/runs", "404"),
    ]
    for answer, method, path, status in answers:
        assert str(answer.status_code) == status, answer.text
        jsonschema_rs.validate(documented(spec, path, method, status), answer.json())
    assert {f["field"] for f in bad.json()["error"]["fields"]} == {"gpu_utilization", "workers"}


def test_the_schema_would_catch_a_different_error_shape(spec: dict[str, Any]) -> None:
    """Not a vacuous schema: FastAPI's default error body does not pass it."""
    schema = documented(spec, "/api/v1/runs", "post", "422")
    fastapi_default = {"detail": [{"loc": ["body", "workers"], "msg": "bad", "type": "x"}]}
    assert not jsonschema_rs.is_valid(schema, fastapi_default)
    assert not jsonschema_rs.is_valid(schema, {"error": {"code": "x", "fields": [{"field": "a"}]}})
    assert jsonschema_rs.is_valid(schema, {"error": {"code": "x", "message": "y"}})
    assert "HTTPValidationError" not in spec["components"]["schemas"]


def test_ingestion_bodies_have_examples(spec: dict[str, Any]) -> None:
    single = spec["paths"]["/api/v1/runs"]["post"]["requestBody"]["content"]["application/json"]
    assert single["example"]["utilization_source"] == "dcgm_sm_active"
    jsonschema_rs.validate(
        {**single["schema"], "components": spec["components"]}, single["example"]
    )
    batch = spec["paths"]["/api/v1/runs/batch"]["post"]["requestBody"]["content"]
    assert batch["application/json"]["example"]["runs"][0]["run_id"] == "2026-11-30-weekly"


def test_bounds_are_standard_json_schema(spec: dict[str, Any]) -> None:
    """pydantic wrote constraints on an Optional next to a validator as "ge"/"le" (6
    places, the price among them): generated clients saw no bounds at all."""
    misplaced: list[str] = []

    def walk(node: Any, path: str) -> None:
        if isinstance(node, dict):
            misplaced.extend(f"{path}.{k}" for k in ("ge", "le", "gt", "lt") if k in node)
            for key, value in node.items():
                walk(value, f"{path}.{key}")
        elif isinstance(node, list):
            for i, value in enumerate(node):
                walk(value, f"{path}[{i}]")

    walk(spec, "")
    assert misplaced == []
    price = spec["components"]["schemas"]["PipelineUpdate"]["properties"]["price_per_gpu_hour"]
    number = price["anyOf"][0]
    assert (number["type"], number["minimum"], number["maximum"]) == ("number", 0.001, 10000)
