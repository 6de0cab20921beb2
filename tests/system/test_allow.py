"""A 405 names every method the path takes (issue 25, item 6): Starlette's names only
the first route whose path matched, so OPTIONS /alerts/deliveries said "Allow: DELETE"."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient

SAMPLES = {"name": "ranker", "pk": "1", "rule_id": "1"}


def concrete(path: str) -> str:
    return re.sub(r"{(\w+)}", lambda m: SAMPLES.get(m.group(1), "x"), path)


def test_every_api_path_answers_options_with_the_documented_methods(
    client: TestClient,
) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert "/api/v1/pipelines/{name}/alerts/deliveries" in paths
    for template, operations in paths.items():
        documented = {m.upper() for m in operations if m != "parameters"}
        r = client.options(concrete(template))
        assert r.status_code == 405, (template, r.status_code)
        assert set(r.headers["allow"].split(", ")) == documented, template


def test_the_alert_paths_in_particular(client: TestClient) -> None:
    base = "/api/v1/pipelines/ranker/alerts"
    assert client.options(f"{base}/deliveries").headers["allow"] == "GET"
    assert client.options(f"{base}/evaluate").headers["allow"] == "POST"
    assert client.options(f"{base}/3").headers["allow"] == "DELETE"
    assert client.options(base).headers["allow"] == "GET, POST"
    assert client.get(f"{base}/evaluate").headers["allow"] == "POST"
    assert client.options("/api/v1/runs/batch").headers["allow"] == "POST"
    assert client.options("/api/v1/runs/7").headers["allow"] == "DELETE, GET"
