"""Evaluations in, the cost-optimal cadence out, through the API (both databases)."""

from __future__ import annotations

from pathlib import Path

import pytest
from cadence_client.commands import evaluations
from fastapi.testclient import TestClient

from app import cli
from app.db.engine import Database
from tests.fixtures.builders import make_token
from tests.fixtures.client import through
from tests.fixtures.evaluations import LINE, P, evaluation, post_runs


def test_end_to_end_optimum_through_the_api(
    client: TestClient, ingest_headers: dict[str, str], admin_headers: dict[str, str]
) -> None:
    post_runs(client, ingest_headers)
    r = client.post(f"{P}/evaluations", json={"evaluations": LINE}, headers=ingest_headers)
    assert r.status_code == 201, r.text
    assert r.json()["created"] == 6
    assert r.json()["evaluations"][1]["age_weeks"] == pytest.approx(1.0)
    # No value yet: a 422 that names the setting.
    r = client.get(f"{P}/cadence")
    assert r.status_code == 422
    assert r.json()["error"]["fields"][0]["field"] == "quality_value_usd_per_unit_month"
    put = client.put(P, json={"quality_value_usd_per_unit_month": 200_000}, headers=admin_headers)
    assert put.status_code == 200 and put.json()["quality_value_usd_per_unit_month"] == 200_000
    body = client.get(f"{P}/cadence").json()
    # methodology.md §11: V = 200,000, b = 0.004, wpm = 52/12, c = 112 x $2.50 = $280:
    # k* = sqrt(800 / 2426.67) = 0.574170 runs/week (every 12 days).
    assert body["decay"]["model"] == "linear"
    assert body["decay"]["rate_per_week"] == pytest.approx(0.004)
    assert body["decay"]["age_range_weeks"] == pytest.approx([0.0, 3.0])
    assert body["cost_per_run_usd"] == pytest.approx(280.0)
    assert body["optimum"]["runs_per_week"] == pytest.approx(0.574170, abs=1e-6)
    assert body["sentence"].startswith("Retraining every 12 days minimises cost: $220/month")
    assert body["value_usd_per_hundredth_month"] == pytest.approx(2000.0)
    assert body["today"]["runs_per_week"] == 1.0
    assert body["sensitivity"]["double_value_runs_per_week"] == pytest.approx(0.811998, abs=2e-6)
    at_daily = body["curve"][-1]
    assert at_daily["runs_per_week"] == pytest.approx(7.0)
    assert at_daily["retrain_usd"] == pytest.approx(7 * 52 / 12 * 280)
    # A scenario price halves the cost per run: k* grows by sqrt(2) to 0.811998.
    cheaper = client.get(f"{P}/cadence", params={"price": 1.25}).json()
    assert cheaper["optimum"]["runs_per_week"] == pytest.approx(0.811998, abs=2e-6)
    # A budget of $1,000 caps retraining at 1000 / (4.3333 x 280) = 0.824176 runs/week,
    # above k*, so the best feasible cadence is the optimum itself.
    capped = client.get(f"{P}/cadence", params={"budget": 1000}).json()
    assert capped["best_feasible"]["runs_per_week"] == pytest.approx(0.574170, abs=1e-6)


def test_retries_conflicts_and_listing(client: TestClient, ingest_headers: dict[str, str]) -> None:
    post_runs(client, ingest_headers, 2)
    body = {"evaluations": LINE}
    assert client.post(f"{P}/evaluations", json=body, headers=ingest_headers).status_code == 201
    again = client.post(f"{P}/evaluations", json=body, headers=ingest_headers)
    assert again.status_code == 200 and again.json()["existing"] == 6
    changed = {"evaluations": [{**LINE[0], "value": 0.5}]}
    r = client.post(f"{P}/evaluations", json=changed, headers=ingest_headers)
    assert r.status_code == 409
    assert r.json()["error"]["fields"][0]["field"] == "evaluations.0.value"
    first = client.get(f"{P}/evaluations", params={"limit": 4}).json()
    assert len(first["evaluations"]) == 4 and first["next_cursor"]
    rest = client.get(f"{P}/evaluations", params={"cursor": first["next_cursor"]}).json()
    assert len(rest["evaluations"]) == 2 and rest["next_cursor"] is None
    ids = [e["id"] for e in first["evaluations"] + rest["evaluations"]]
    assert len(set(ids)) == 6
    times = [e["evaluated_at"] for e in first["evaluations"] + rest["evaluations"]]
    assert times == sorted(times, reverse=True)
    only = client.get(f"{P}/evaluations", params={"run_id": "run-2"}).json()
    assert {e["run_id"] for e in only["evaluations"]} == {"run-2"}


def test_bad_items_are_422_naming_them_and_nothing_is_stored(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    post_runs(client, ingest_headers, 1)
    bad = [
        evaluation("run-1", 1, 0.79),
        evaluation("run-9", 1, 0.79),  # unknown run
        {**evaluation("run-1", 0, 0.8), "evaluated_at": "2026-11-02T21:00:00+00:00"},
        evaluation("run-1", 2, 0.78, metric="auc"),  # the pipeline measures ndcg
    ]
    r = client.post(f"{P}/evaluations", json={"evaluations": bad}, headers=ingest_headers)
    assert r.status_code == 422
    fields = [f["field"] for f in r.json()["error"]["fields"]]
    assert fields == ["evaluations.1.run_id", "evaluations.2.evaluated_at", "evaluations.3.metric"]
    assert client.get(f"{P}/evaluations").json()["evaluations"] == []
    # Non-finite values and timestamps without an offset are refused by the schema.
    raw = (
        '{"evaluations": [{"run_id": "run-1", "evaluated_at": "2026-11-03T00:00:00Z", '
        '"value": NaN}]}'
    )
    r = client.post(
        f"{P}/evaluations",
        content=raw,
        headers={**ingest_headers, "Content-Type": "application/json"},
    )
    assert r.status_code == 422
    assert r.json()["error"]["fields"][0]["field"] == "evaluations.0.value"
    naive = {
        "evaluations": [{**evaluation("run-1", 1, 0.79), "evaluated_at": "2026-11-10T00:00:00"}]
    }
    r = client.post(f"{P}/evaluations", json=naive, headers=ingest_headers)
    assert r.status_code == 422
    assert r.json()["error"]["fields"][0]["field"] == "evaluations.0.evaluated_at"
    many = {"evaluations": [evaluation("run-1", 1, 0.79)] * 1001}
    r = client.post(f"{P}/evaluations", json=many, headers=ingest_headers)
    assert r.status_code == 422 and r.json()["error"]["fields"][0]["field"] == "evaluations"
    assert client.post(f"{P}/evaluations", json={"evaluations": LINE[:1]}).status_code == 401


def test_cadence_needs_evaluations(
    client: TestClient, ingest_headers: dict[str, str], admin_headers: dict[str, str]
) -> None:
    post_runs(client, ingest_headers, 1)
    client.put(P, json={"quality_value_usd_per_unit_month": 1000}, headers=admin_headers)
    r = client.get(f"{P}/cadence")
    assert r.status_code == 422
    assert r.json()["error"]["fields"][0]["field"] == "evaluations"
    assert "needs at least 3" in r.json()["error"]["message"]


def test_pipeline_page_section_empty_then_filled(
    client: TestClient, ingest_headers: dict[str, str], admin_headers: dict[str, str]
) -> None:
    post_runs(client, ingest_headers)
    html = client.get("/pipelines/ranker").text
    assert "What retraining more often buys" in html
    assert 'data-empty="cadence_value"' in html and "No decay curve yet" in html
    client.post(f"{P}/evaluations", json={"evaluations": LINE}, headers=ingest_headers)
    html = client.get("/pipelines/ranker").text
    assert 'id="chart-decay"' in html and "No value set" in html
    client.put(P, json={"quality_value_usd_per_unit_month": 200_000}, headers=admin_headers)
    html = client.get("/pipelines/ranker").text
    assert "Retraining every 12 days minimises cost: $220/month less than weekly." in html
    assert 'id="chart-cadence_value"' in html
    assert "$2,000/month per 0.01" in html  # 200,000 per unit = 2,000 per 0.01


PLAN = {"workers": 8, "wall_clock_hours": 14, "gpu_utilization": 0.38, "price_per_gpu_hour": 2.5}


def test_plan_takes_a_decay_rate_or_points_and_a_value(client: TestClient) -> None:
    # One described run: 8 x 14 h x $2.50 = $280; with V = 200,000 and b = 0.004 the
    # optimum is the methodology.md §11 check, 0.574170 runs/week.
    value = {"quality_value_usd_per_unit_month": 200_000, "rate_per_week": 0.004}
    out = client.post("/api/v1/plan", json={**PLAN, "value": value}).json()
    assert out["cadence"]["optimum"]["runs_per_week"] == pytest.approx(0.574170, abs=1e-6)
    assert out["decay"] is None
    points = [{"age_weeks": a, "value": 0.8 - 0.004 * a} for a in (0, 1, 2, 3)]
    value = {"quality_value_usd_per_unit_month": 200_000, "points": points}
    out = client.post("/api/v1/plan", json={**PLAN, "value": value}).json()
    assert out["decay"]["decay"]["rate_per_week"] == pytest.approx(0.004)
    assert out["cadence"]["optimum"]["runs_per_week"] == pytest.approx(0.574170, abs=1e-6)
    # A utilization target of 76% halves the GPU-hours (38/76): c = $140, k* x sqrt(2).
    out = client.post(
        "/api/v1/plan",
        json={**PLAN, "value": value, "what_if": {"utilization_target": 0.76}},
    ).json()
    assert out["cadence"]["optimum"]["runs_per_week"] == pytest.approx(0.811998, abs=2e-6)
    both = {**value, "rate_per_week": 0.004}
    r = client.post("/api/v1/plan", json={**PLAN, "value": both})
    assert r.status_code == 422 and "not both" in r.text


def test_report_evaluations_command_posts_a_csv(
    client: TestClient,
    db: Database,
    ingest_headers: dict[str, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    post_runs(client, ingest_headers, 2)
    path = tmp_path / "evaluations.csv"
    rows = ["run_id,evaluated_at,value"] + [
        f"{e['run_id']},{e['evaluated_at']},{e['value']}" for e in LINE
    ]
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    token = make_token(db, "ingest", name="cli-evaluations")
    argv = ["report-evaluations", "--pipeline", "ranker", "--file", str(path), "--token", token]
    args = cli.parser().parse_args([*argv, "--url", "http://testserver"])
    assert evaluations.run(args, transport=through(client, [])) == 0
    assert "6 evaluations stored: 6 created, 0 already there" in capsys.readouterr().out
    assert evaluations.run(args, transport=through(client, [])) == 0
    assert "0 created, 6 already there" in capsys.readouterr().out
    path.write_text(rows[0] + "\nrun-9,2026-11-03T00:00:00+00:00,0.8\n", encoding="utf-8")
    assert evaluations.run(args, transport=through(client, [])) == 1
    # The refusal names the record and field in the user's terms, not the API location.
    err = capsys.readouterr().err
    assert "evaluation 1 (run run-9): run_id: no run 'run-9' in pipeline 'ranker'" in err
    assert "evaluations.0" not in err


def test_aicc_is_null_where_undefined_and_the_schema_says_so(client: TestClient) -> None:
    """3 evaluations: the line's AICc has n - p - 1 = 3 - 3 - 1 < 0, undefined (inf in
    the arithmetic), sent as null against a schema of plain numbers."""
    points = [{"age_weeks": a, "value": 0.8 - 0.004 * a} for a in (0, 1, 2)]
    value = {"quality_value_usd_per_unit_month": 200_000, "points": points}
    out = client.post("/api/v1/plan", json={**PLAN, "value": value})
    assert out.status_code == 200, out.text
    assert out.json()["decay"]["aicc"] == {"linear": None}
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    for model in ("DecayOut", "DecayFit"):
        aicc = schemas[model]["properties"]["aicc"]["additionalProperties"]
        assert {"type": "null"} in aicc["anyOf"], model


def test_the_value_section_follows_the_what_if(
    client: TestClient, ingest_headers: dict[str, str], admin_headers: dict[str, str]
) -> None:
    """The what-if's re-render carries the value section, for its cadence: what the
    proposed cadence buys against today's (1/week) in dollars, and the API says the
    same sentence."""
    post_runs(client, ingest_headers)
    client.post(f"{P}/evaluations", json={"evaluations": LINE}, headers=ingest_headers)
    client.put(P, json={"quality_value_usd_per_unit_month": 200_000}, headers=admin_headers)
    page = client.get("/pipelines/ranker").text
    assert 'id="whatif-value"' in page and "instead of today&#39;s 1×/week" in page  # 2/week
    twice = client.get("/pipelines/ranker/whatif", params={"cadence": 2}).json()["value_html"]
    thrice = client.get("/pipelines/ranker/whatif", params={"cadence": 3}).json()["value_html"]
    assert "Retraining 2×/week instead of" in twice and "Retraining 3×/week instead" in thrice
    api = client.get(f"{P}/cadence", params={"cadence": 3}).json()
    assert api["proposed"]["runs_per_week"] == 3
    assert api["proposed_sentence"].replace("'", "&#39;") in thrice  # the page escapes the quote
