"""Variant descriptions and the gate's quality margin: pipeline settings set by the API
PUT (audited), shown wherever a variant is named, and used by the gate."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient

HTML = {"Accept": "text/html"}
DESCRIBED = {"baseline": "the current job", "candidate": "sharded input + async checkpoints"}


def test_put_sets_both_and_every_change_is_audited(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    r = client.put(
        "/api/v1/pipelines/ranker", json={"monthly_budget_usd": 10}, headers=admin_headers
    )
    assert r.status_code == 200
    assert r.json()["variant_descriptions"] == {} and r.json()["quality_margin"] == 0.01
    body = {"variant_descriptions": {"candidate": "sharded input"}, "quality_margin": 0.02}
    r = client.put("/api/v1/pipelines/ranker", json=body, headers=admin_headers)
    assert r.status_code == 200, r.text
    got = client.get("/api/v1/pipelines/ranker").json()
    assert got["variant_descriptions"] == {"candidate": "sharded input"}
    assert got["quality_margin"] == 0.02
    # Omitted: kept; {} clears the descriptions.
    client.put("/api/v1/pipelines/ranker", json={"price_per_gpu_hour": 3.0}, headers=admin_headers)
    assert client.get("/api/v1/pipelines/ranker").json()["quality_margin"] == 0.02
    r = client.put(
        "/api/v1/pipelines/ranker", json={"variant_descriptions": {}}, headers=admin_headers
    )
    assert r.json()["variant_descriptions"] == {}
    history = client.get("/pipelines/ranker/settings", headers=HTML).text
    assert '<tr data-change="quality_margin">' in history
    assert "<td>Variant descriptions</td><td>candidate: sharded input</td><td>not set</td>" in (
        history
    )
    assert "<td>Variant descriptions</td><td>not set</td><td>candidate: sharded input</td>" in (
        history
    )


def test_bad_values_are_refused_naming_the_field(
    client: TestClient, admin_headers: dict[str, str]
) -> None:
    cases = [
        ({"quality_margin": -0.1}, "quality_margin"),
        ({"quality_margin": "0.1"}, "quality_margin"),  # strict JSON: a number
        ({"variant_descriptions": {"candidate": ""}}, "variant_descriptions.candidate"),
        ({"variant_descriptions": {"candidate": "a\nb"}}, "variant_descriptions.candidate"),
        ({"variant_descriptions": {f"v{i}": "x" for i in range(21)}}, "variant_descriptions"),
    ]
    for body, field in cases:
        r = client.put("/api/v1/pipelines/ranker", json=body, headers=admin_headers)
        assert r.status_code == 422, (body, r.text)
        assert r.json()["error"]["fields"][0]["field"] == field, (body, r.json())


def margin_in_quality_criterion(gate: dict) -> float:
    """The margin the gate's quality criterion used (its threshold is minus the margin,
    on the sign-adjusted difference)."""
    [quality] = [c for c in gate["result"]["criteria"] if c["name"] == "quality_non_inferiority"]
    return abs(quality["threshold"])


def test_the_gate_uses_the_pipelines_margin_unless_the_request_gives_one(
    demo: TestClient, admin_headers: dict[str, str]
) -> None:
    assert (
        margin_in_quality_criterion(demo.get("/api/v1/pipelines/recsys-ranker/gate").json()) == 0.01
    )
    r = demo.put(
        "/api/v1/pipelines/recsys-ranker", json={"quality_margin": 0.05}, headers=admin_headers
    )
    assert r.status_code == 200
    assert (
        margin_in_quality_criterion(demo.get("/api/v1/pipelines/recsys-ranker/gate").json()) == 0.05
    )
    given = demo.get("/api/v1/pipelines/recsys-ranker/gate?quality_margin=0.02").json()
    assert margin_in_quality_criterion(given) == 0.02
    # The page's gate form shows the margin in force.
    page = demo.get("/pipelines/recsys-ranker", headers=HTML).text
    assert 'name="margin" min="0" step="any" value="0.05"' in page


def test_descriptions_are_shown_where_the_variant_is_named(demo: TestClient) -> None:
    """The demo describes the ranker's variants."""
    page = demo.get("/pipelines/recsys-ranker", headers=HTML).text
    decision = page.split('data-testid="decision"', 1)[1].split("</p>", 1)[0]
    assert "candidate (sharded input + async checkpoints)" in decision
    assert "baseline (the current job): a typical month at 2×/week" in page  # the cost card
    assert "<td>candidate (sharded input + async checkpoints)</td>" in page  # runs table
    run = re.search(r'href="/runs/(\d+)"', page)
    assert run is not None
    run_page = demo.get(f"/runs/{run.group(1)}", headers=HTML).text
    assert "(sharded input + async checkpoints)" in run_page or "(the current job)" in run_page
    overview = demo.get("/", headers=HTML).text
    assert "baseline (the current job)" in overview and "at 1×/week: " in overview
