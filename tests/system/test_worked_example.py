"""The worked example of docs/methodology.md §1, end to end through the API (recorded
runs and /plan)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.fixtures.builders import make_run


def weekly_runs(n: int, **overrides: Any) -> list[dict[str, Any]]:
    start = datetime(2026, 9, 7, 2, tzinfo=UTC)  # a Monday
    out = []
    for i in range(n):
        s = start + timedelta(weeks=i)
        run = make_run(
            run_id=f"w{i}",
            started_at=s.isoformat(),
            finished_at=(s + timedelta(hours=14)).isoformat(),
            interruptions=[],
            data_stall_hours=5.0,
            checkpoint_hours=1.0,
        )
        run.update(overrides)
        out.append(run)
    return out


@pytest.fixture
def example(
    client: TestClient, ingest_headers: dict[str, str], admin_headers: dict[str, str]
) -> TestClient:
    client.put(
        "/api/v1/pipelines/ranker",
        headers=admin_headers,
        json={"price_per_gpu_hour": 2.5, "monthly_budget_usd": 1400, "runs_per_week": 1},
    )
    runs = weekly_runs(4)
    # Scaling probes of the same job: 8 workers take 14 h, 16 workers take 13 h.
    probe = datetime(2026, 10, 5, 2, tzinfo=UTC)
    for workers, hours in ((8, 14.0), (16, 13.0)):
        runs.append(
            make_run(
                run_id=f"probe-{workers}",
                variant="probe",
                workers=workers,
                started_at=probe.isoformat(),
                interruptions=[],
                finished_at=(probe + timedelta(hours=hours)).isoformat(),
            )
        )
    r = client.post("/api/v1/runs/batch", json={"runs": runs}, headers=ingest_headers)
    assert r.status_code == 201, r.text
    return client


def cadence(body: dict[str, Any], variant: str, k: float) -> dict[str, Any]:
    rows = body["projections"][variant]["cadences"]
    return next(c for c in rows if c["runs_per_week"] == k)


def test_112_gpu_hours_per_run(example: TestClient) -> None:
    body = example.get("/api/v1/pipelines/ranker/projection", params={"variant": "baseline"}).json()
    weekly = cadence(body, "baseline", 1)
    assert weekly["gpu_hours_per_run"] == pytest.approx(112.0)  # 8 workers x 14 h
    # 112 GPU-h x 52/12 weeks = 485.33 GPU-h/month; x $2.50 = $1,213.33
    assert weekly["monthly_gpu_hours"] == pytest.approx(485.333, rel=1e-4)
    assert weekly["monthly_cost_usd"] == pytest.approx(1213.333, rel=1e-4)


@pytest.mark.parametrize(("convention", "weeks"), [("calendar", 52 / 12), ("four_week", 4.0)])
def test_38_to_70_percent_twice_weekly(example: TestClient, convention: str, weeks: float) -> None:
    body = example.get(
        "/api/v1/pipelines/ranker/projection",
        params={
            "variant": "baseline",
            "cadences": "1,2",
            "utilization_target": 0.7,
            "weeks_per_month": convention,
        },
    ).json()
    projection = body["projections"]["baseline"]
    # Today: weekly at 112 GPU-h -> 112 x weeks GPU-h/month (485.33 or 448).
    assert projection["current_monthly_gpu_hours"] == pytest.approx(112 * weeks)
    twice = cadence(body, "baseline", 2)
    # 38% -> 70% at the same useful work: G x 38/70 = 60.8 GPU-h per run.
    assert twice["gpu_hours_per_run"] == pytest.approx(60.8)
    # Twice weekly: 2 x 60.8 = 121.6 vs 112 today: x1.0857 (+8.6%), whatever the month.
    assert twice["vs_current_ratio"] == pytest.approx(121.6 / 112)
    assert twice["monthly_cost_usd"] == pytest.approx(2 * 60.8 * weeks * 2.5)


def test_sixteen_workers_barely_help(example: TestClient) -> None:
    body = example.get(
        "/api/v1/pipelines/ranker/projection",
        params={"variant": "baseline", "workers": 16, "cadences": "1"},
    ).json()
    weekly = cadence(body, "baseline", 1)
    # Input-bound: the probes say 16 workers take 13 h, so 16 x 13 = 208 GPU-h per run.
    assert weekly["wall_clock_hours_per_run"] == pytest.approx(13.0, rel=1e-6)
    assert weekly["gpu_hours_per_run"] == pytest.approx(208.0, rel=1e-6)
    scaling = example.get("/api/v1/pipelines/ranker/scaling", params={"workers": 16}).json()
    assert scaling["variant"] == "probe"
    assert scaling["prediction"]["gpu_hours"] == pytest.approx(208.0, rel=1e-6)
    assert scaling["prediction"]["extrapolation"] is False


def test_512_instance_mtbf_and_daly(example: TestClient) -> None:
    r = example.get(
        "/api/v1/pipelines/ranker/checkpoints",
        params={
            "instances": 512,
            "failure_rate": 4e-4,
            "checkpoint_write_hours": 5 / 60,
            "checkpoint_interval_hours": 1.0,
        },
    ).json()
    # M = 1 / (512 x 0.0004) = 4.883 h
    assert r["advice"]["mtbf_hours"] == pytest.approx(4.8828, rel=1e-4)
    assert r["inputs"]["instances"]["source"] == "query"
    # Daly check: d = 5 min, M = 24 h (1 instance at 1/24 per hour) gives ~117 min.
    r = example.get(
        "/api/v1/pipelines/ranker/checkpoints",
        params={
            "instances": 1,
            "failure_rate": 1 / 24,
            "checkpoint_write_hours": 5 / 60,
            "checkpoint_interval_hours": 1.0,
        },
    ).json()
    assert r["advice"]["mtbf_hours"] == pytest.approx(24.0)
    assert r["advice"]["daly_interval_hours"] * 60 == pytest.approx(116.7, abs=0.1)


def test_worked_example_through_plan(client: TestClient) -> None:
    body = {
        "workers": 8,
        "wall_clock_hours": 14,
        "gpu_utilization": 0.38,
        "price_per_gpu_hour": 2.5,
        "cadences": [1, 2],
        "current_runs_per_week": 1,
        "weeks_per_month": "four_week",
        "what_if": {"utilization_target": 0.7},
        "checkpoints": {
            "instances": 512,
            "failure_rate": 0.0004,
            "checkpoint_write_hours": 0.0833333,
            "checkpoint_interval_hours": 1,
        },
    }
    r = client.post("/api/v1/plan", json=body)
    assert r.status_code == 200, r.text
    out = r.json()
    twice = out["projection"]["cadences"][1]
    assert twice["gpu_hours_per_run"] == pytest.approx(60.8)
    assert twice["vs_current_ratio"] == pytest.approx(121.6 / 112)
    assert out["projection"]["current_monthly_gpu_hours"] == pytest.approx(448.0)  # 112 x 4
    assert out["checkpoints"]["mtbf_hours"] == pytest.approx(4.8828, rel=1e-4)
    body = {
        "workers": 8,
        "wall_clock_hours": 14,
        "gpu_utilization": 0.38,
        "price_per_gpu_hour": 2.5,
        "cadences": [1],
        "what_if": {"workers": 16},
        "scaling_probes": [
            {"workers": 8, "wall_clock_hours": 14},
            {"workers": 16, "wall_clock_hours": 13},
        ],
    }
    out = client.post("/api/v1/plan", json=body).json()
    assert out["projection"]["cadences"][0]["gpu_hours_per_run"] == pytest.approx(208.0)
    assert out["scaling_model"]["kind"] == "amdahl"
