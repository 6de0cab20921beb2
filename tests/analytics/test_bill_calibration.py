"""Calibration is the test of a forecast (DOMAIN.md section 9, methodology.md §5.5).

Simulated pipelines with skewed retraining costs and failed attempts: each retraining's
first attempt costs a lognormal amount (sigma 0.1 to 0.4 on the log scale); each attempt
fails with probability f (0 to 0.3, up to two failed attempts) and a failed attempt
costs 20% to 100% of a full one, which is paid on top. Each pipeline retrains 1 to 4
times a week (typical calendar months) and has a budget between 0.9 and 1.6 times
runs per month x its median base cost, so P(over) spreads over [0, 1].

For each pipeline: a window of its last 20 retrainings, the forecast from that window,
then real months drawn from the true process. Two real months each, 5,000 months:

- the p90 bill is exceeded in 10% +- 4% of months (measured 12.2% with these seeds,
  13.1% before the stretch allowed for the window's kurtosis; the bootstrap of 20
  skewed costs still under-covers a little, see methodology.md);
- P(over budget) is calibrated: in each fifth of the predicted range, the share of
  months over budget is within 5 points of the mean predicted P (each fifth holds
  500+ months, two to a pipeline).

The old estimator (median per run x runs per month, its band the bootstrap of the
median: what app/planning/projection.py computed) on the same months: its p90 was
exceeded in 41% of them, and its P(over) was far off (see the last test).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app.planning.bill import forecast_bill
from app.planning.cost_series import fit
from app.planning.schedule import typical_month_runs
from app.planning.series_bill import typical_month
from tests.fixtures.old_estimator import bootstrap_medians

PIPELINES = 2500
MONTHS = 2  # real months drawn per pipeline
OLD_PIPELINES = 600  # the old estimator's miss is large: fewer pipelines show it
WINDOW = 20
DRAWS = 1000


def _retrainings(
    rng: np.random.Generator, size: int, mu: float, sigma: float, f: float
) -> np.ndarray:
    base = rng.lognormal(mu, sigma, size)
    cost = base.copy()
    failing = np.ones(size, dtype=bool)
    for _ in range(2):  # the first, then the second attempt fails with probability f
        failing &= rng.random(size) < f
        cost += failing * base * rng.uniform(0.2, 1.0, size)
    return cost


@lru_cache(maxsize=1)
def _simulate() -> dict[str, np.ndarray]:
    """The 5,000 months, simulated once for the three tests (about 2 s on one core)."""
    rng = np.random.default_rng(20261201)
    names = ("bill", "p90", "p_over", "over", "old_bill", "old_p90", "old_p_over")
    out: dict[str, list[float]] = {k: [] for k in names}
    for p in range(PIPELINES):
        mu, sigma, f = rng.uniform(4.0, 6.0), rng.uniform(0.1, 0.4), rng.uniform(0.0, 0.3)
        runs = typical_month_runs(int(rng.integers(1, 5)))
        window = _retrainings(rng, WINDOW, mu, sigma, f)
        budget = runs.mean * float(np.exp(mu)) * rng.uniform(0.9, 1.6)
        forecast = forecast_bill(window, runs, budget_usd=budget, draws=DRAWS, seed=p)
        if p < OLD_PIPELINES:
            medians = runs.mean * bootstrap_medians(window, seed=p, resamples=DRAWS)
            old_p90, old_p_over = np.percentile(medians, 90), np.mean(medians > budget)
        for n in rng.choice(runs.counts, p=runs.probabilities, size=MONTHS):
            bill = float(_retrainings(rng, int(n), mu, sigma, f).sum())
            out["bill"].append(bill)
            out["p90"].append(forecast.bill_p90_usd)
            out["p_over"].append(forecast.p_over_budget or 0.0)
            out["over"].append(float(bill > budget))
            if p < OLD_PIPELINES:
                out["old_bill"].append(bill)
                out["old_p90"].append(float(old_p90))
                out["old_p_over"].append(float(old_p_over))
    return {k: np.asarray(v) for k, v in out.items()}


def _reliability_gaps(predicted: np.ndarray, observed: np.ndarray) -> list[float]:
    """Observed share over budget minus mean predicted P, per fifth of [0, 1]."""
    bins = np.minimum((predicted * 5).astype(int), 4)
    gaps = []
    for b in range(5):
        chosen = bins == b
        assert chosen.sum() >= 500, f"bin {b} has only {chosen.sum()} months"
        gaps.append(float(observed[chosen].mean() - predicted[chosen].mean()))
    return gaps


def test_p90_bill_is_exceeded_in_about_one_month_in_ten() -> None:
    sim = _simulate()
    exceeded = float(np.mean(sim["bill"] > sim["p90"]))
    assert 0.06 <= exceeded <= 0.14, exceeded


def test_p_over_budget_is_calibrated() -> None:
    sim = _simulate()
    gaps = _reliability_gaps(sim["p_over"], sim["over"])
    assert max(abs(g) for g in gaps) <= 0.05, gaps


def test_old_estimator_was_not_calibrated() -> None:
    # The median x runs per month describes a typical month's *typical* retraining, and
    # its band the uncertainty of that median: months with failures above it are common.
    sim = _simulate()
    exceeded = float(np.mean(sim["old_bill"] > sim["old_p90"]))
    assert exceeded > 0.30, exceeded
    # The old estimator's months are the first ones simulated (its pipelines come first).
    gaps = _reliability_gaps_any(sim["old_p_over"], sim["over"][: sim["old_bill"].size])
    assert max(gaps) > 0.10, gaps


def _reliability_gaps_any(predicted: np.ndarray, observed: np.ndarray) -> list[float]:
    """As above, skipping fifths with fewer than 100 months (the old P crowds at 0 and 1)."""
    bins = np.minimum((predicted * 5).astype(int), 4)
    return [
        float(observed[bins == b].mean() - predicted[bins == b].mean())
        for b in range(5)
        if (bins == b).sum() >= 100
    ]


def test_the_api_serves_the_calibrated_forecast(
    client: TestClient, ingest_headers: dict[str, str], admin_headers: dict[str, str]
) -> None:
    """The forecast calibrated above is the one the API serves from stored attempts, on
    either database. DOMAIN.md section 9's window: 20 retrainings, 14 costing $100 (4
    workers x 10 h at $2.50) and 6 whose first attempt failed ($200: 8 x 10 h) and ran
    again ($100): $300. At 2 runs/week the expected bill is 8.667 x $160 = $1,386.67."""
    from datetime import UTC, datetime, timedelta

    from tests.fixtures.builders import make_run

    first = datetime.now(UTC).replace(microsecond=0) - timedelta(weeks=12)
    runs, costs = [], []
    for i in range(20):
        start = first + timedelta(days=3.5 * i)
        slot = {"started_at": start, "finished_at": start + timedelta(hours=10)}
        common = {
            "pipeline": "calib", "price_per_gpu_hour": 2.5, "data_stall_hours": 0.0,
            "checkpoint_hours": 0.0, "interruptions": [], "retraining_id": f"r{i}",
        }  # fmt: skip
        if i % 10 in (1, 3, 5):  # 6 of 20 with a failed first attempt
            failed = {k: v.isoformat() for k, v in slot.items()}
            runs.append(make_run(**common, **failed, run_id=f"r{i}-a", workers=8, outcome="failed"))
            slot = {k: v + timedelta(hours=11) for k, v in slot.items()}
        runs.append(
            make_run(
                **common, **{k: v.isoformat() for k, v in slot.items()}, run_id=f"r{i}-b", workers=4
            )
        )
        costs.append(300.0 if i % 10 in (1, 3, 5) else 100.0)
    r = client.post("/api/v1/runs/batch", json={"runs": runs}, headers=ingest_headers)
    assert r.status_code == 201, r.text
    body = {"monthly_budget_usd": 1200.0, "runs_per_week": 2, "price_per_gpu_hour": 2.5}
    assert client.put("/api/v1/pipelines/calib", json=body, headers=admin_headers).is_success
    proj = client.get("/api/v1/pipelines/calib/projection", params={"cadence": 2}).json()
    at2 = next(c for c in proj["projections"]["baseline"]["cadences"] if c["runs_per_week"] == 2)
    assert abs(at2["expected_bill_usd"] - 2 * 52 / 12 * 160.0) < 1e-6  # $1,386.67
    # The API reads the window as a cost series (app/planning/cost_series.py): the base
    # costs ($100) resampled and the tail (6 of 20 add $200) drawn apart, so its P(over)
    # is the series model's, 0.6835 (DOMAIN.md section 9's exact value for this cost
    # distribution: 0.6854; the plain bootstrap said 0.6505). No trend and no change: the
    # days do not move any figure.
    extras = [c - 100.0 for c in costs]
    model = fit(costs, extras, [3.5 * i for i in range(20)])
    runs2 = typical_month_runs(2.0, "calendar")
    pure = typical_month(model, runs2, 2.0, 70.0, budget_usd=1200.0, seed=0)
    assert at2["p_over_budget"] == pure.p_over_budget == pytest.approx(0.6854, abs=0.01)
    assert (at2["bill_p10_usd"], at2["bill_p90_usd"]) == (pure.bill_p10_usd, pure.bill_p90_usd)
    assert at2["monthly_cost_usd"] == at2["expected_bill_usd"]
