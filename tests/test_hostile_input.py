"""Injection, escaping and limits: hostile strings are stored exactly or refused with a 4xx."""

from __future__ import annotations

import unicodedata
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.conftest import make_run

STORED_EXACTLY = [
    "'; DROP TABLE run; --",
    "Robert'); DELETE FROM pipeline WHERE ('1'='1",
    "</script><script>alert(1)</script>",
    '<img src=x onerror="alert(1)">',
    "ünïcödé · 日本語 · עברית · العربية",
    "emoji 🚀🔥 and a 4-byte 𝔘",
    "combining e\u0301 is stored composed",
    "%s %(name)s {0} $1 \\x00 literal backslashes",
]


@pytest.mark.parametrize("text", STORED_EXACTLY)
def test_hostile_strings_round_trip_exactly(
    client: TestClient, ingest_headers: dict[str, str], text: str
) -> None:
    run = make_run(
        run_id=text[:200],
        variant=text[:64],
        tags={text[:100]: text},
        gpu_type=text[:64],
        quality_metric=text[:100],
    )
    r = client.post("/api/v1/runs", json=run, headers=ingest_headers)
    assert r.status_code == 201, r.text
    stored = client.get(f"/api/v1/runs/{r.json()['id']}").json()
    value, text = text, unicodedata.normalize("NFC", text)  # one spelling per identifier
    assert stored["run_id"] == text[:200]
    assert stored["variant"] == text[:64]
    assert stored["tags"] == {text[:100]: value}  # tag values are text, kept as sent
    assert stored["quality_metric"] == text[:100]
    # ...and filters with it are parameters, not SQL.
    listed = client.get("/api/v1/runs", params={"pipeline": "ranker", "variant": text[:64]})
    assert [x["id"] for x in listed.json()["runs"]] == [stored["id"]]


REFUSED: list[tuple[dict[str, Any], str, str]] = [
    ({"run_id": "nul\x00byte"}, "run_id", "control characters"),
    ({"variant": "bell\x07"}, "variant", "control characters"),
    ({"tags": {"k": "a\x00b"}}, "tags.k", "control characters"),
    ({"run_id": "x" * 201}, "run_id", "at most 200"),
    ({"variant": "v" * 65}, "variant", "at most 64"),
    ({"tags": {"k" * 101: "v"}}, "tags.", "at most 100"),
    ({"tags": {"k": "v" * 501}}, "tags.k", "at most 500"),
    ({"tags": {f"k{i}": "v" for i in range(51)}}, "tags", "at most 50"),
    ({"pipeline": "DROP TABLE"}, "pipeline", "slug"),
    ({"pipeline": "ünïcode"}, "pipeline", "slug"),
    ({"interruptions": [{"cause": "c" * 201}]}, "interruptions.0.cause", "at most 200"),
]


@pytest.mark.parametrize(("override", "field", "reason"), REFUSED)
def test_hostile_or_oversized_input_refused_with_field(
    client: TestClient,
    ingest_headers: dict[str, str],
    override: dict[str, Any],
    field: str,
    reason: str,
) -> None:
    r = client.post("/api/v1/runs", json=make_run(**override), headers=ingest_headers)
    assert r.status_code == 422, r.text
    fields = r.json()["error"]["fields"]
    match = [f for f in fields if f["field"].startswith(field)]
    assert match, fields
    assert reason in match[0]["reason"]


def test_hostile_path_and_query_values(client: TestClient) -> None:
    assert client.get("/api/v1/pipelines/'; DROP TABLE run; --").status_code == 404
    r = client.get("/api/v1/runs", params={"pipeline": "x' OR '1'='1"})
    assert r.status_code == 404
    assert client.get("/api/v1/runs/1 OR 1=1").status_code == 422
    assert client.get("/api/v1/runs/99999999999999999999").status_code == 422
    assert client.get("/api/v1/pipelines").status_code == 200  # nothing was dropped
