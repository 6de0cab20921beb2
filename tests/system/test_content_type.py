"""API bodies must say they are JSON, or say nothing (issue 25, item 6): any
Content-Type used to be parsed as JSON."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from app.middleware import is_json
from tests.fixtures.builders import make_run

RUN = json.dumps(make_run(run_id="ct-1")).encode()


@pytest.mark.parametrize(
    "content_type",
    ["text/plain", "application/x-www-form-urlencoded", "text/csv", "application/xml", "json"],
)
def test_a_body_declared_not_json_is_a_415(
    client: TestClient, ingest_headers: dict[str, str], content_type: str
) -> None:
    for path in ("/api/v1/runs", "/api/v1/runs/batch", "/api/v1/plan"):
        r = client.post(path, content=RUN, headers={**ingest_headers, "content-type": content_type})
        assert r.status_code == 415, (path, r.text)
        error = r.json()["error"]
        assert error["code"] == "unsupported_media_type" and content_type in error["message"]
        assert error["fields"] == [{"field": "Content-Type", "reason": "must be application/json"}]
    assert client.get("/api/v1/runs").json()["runs"] == []  # nothing stored


@pytest.mark.parametrize(
    "content_type",
    ["application/json", "application/json; charset=utf-8", "APPLICATION/JSON", None],
)
def test_json_or_no_content_type_is_read_as_json(
    client: TestClient, ingest_headers: dict[str, str], content_type: str | None
) -> None:
    """No Content-Type is taken as JSON: raw-bytes clients send none (httpx's content=)."""
    headers = dict(ingest_headers)
    if content_type:
        headers["content-type"] = content_type
    r = client.post("/api/v1/runs", content=RUN, headers=headers)
    assert r.status_code == 201, r.text


def test_a_post_without_a_body_is_not_checked(
    client: TestClient, admin_headers: dict[str, str], ingest_headers: dict[str, str]
) -> None:
    client.post("/api/v1/runs", content=RUN, headers=ingest_headers)
    r = client.post(
        "/api/v1/pipelines/ranker/alerts/evaluate",
        headers={**admin_headers, "content-type": "application/x-www-form-urlencoded"},
    )
    assert r.status_code == 200, r.text


def test_what_counts_as_json() -> None:
    assert is_json(b"application/json") and is_json(b"application/problem+json; charset=x")
    assert not is_json(b"text/json") and not is_json(b"application/jsonx")
