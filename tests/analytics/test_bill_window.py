"""The bill draws retraining costs: a retraining's failed attempts are priced in
(methodology.md §5.1, §5.3).

One retraining "nightly-1": a failed attempt of 4 workers x 5 h = 20 GPU-h at $3 ($60)
and its successful retry of 8 x 14 h = 112 GPU-h at $3 ($336): the retraining costs $396.
A second retraining "nightly-2", one attempt like the retry: $336. At 1 run a week in
four-week months (N = 4 exactly) the expected bill is 4 x (396 + 336) / 2 = $1,464, where
the succeeded attempts alone would say 4 x 336 = $1,344.
"""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.fixtures.builders import crashed, last_week_day, make_run, retried


def test_failed_attempts_are_in_the_bill(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    second = make_run(
        pipeline="attempts", run_id="nightly-2", retraining_id="nightly-2",
        gpu_utilization=0.38, workers=8, price_per_gpu_hour=3.0, data_stall_hours=0.0,
        checkpoint_hours=0.0, interruptions=[], **last_week_day(3, 6, 14.0),
    )  # fmt: skip
    for run in (crashed(), retried(), second):
        r = client.post("/api/v1/runs", json=run, headers=ingest_headers)
        assert r.status_code == 201, r.text
    q = {"cadence": 1, "weeks_per_month": "four_week"}
    body = client.get("/api/v1/pipelines/attempts/projection", params=q).json()
    (proj,) = body["projections"].values()
    at1 = next(c for c in proj["cadences"] if c["runs_per_week"] == 1)
    assert at1["runs_in_month"] == 4.0
    assert at1["mean_cost_per_run_usd"] == pytest.approx(366.0)  # base x (1 + tail): float
    assert abs(at1["expected_bill_usd"] - 1464.0) < 1e-6
    assert at1["bill_p10_usd"] < 1464.0 < at1["bill_p90_usd"]
    # The monthly cost is the expected bill; a typical retraining is the median run.
    assert abs(at1["monthly_cost_usd"] - 1464.0) < 1e-6
    assert at1["cost_per_run_usd"] == 336.0
    # A price what-if reaches the failed attempt too: $4 x (20 + 112) = $528 and 4 x 112
    # = $448: expected bill 4 x (528 + 448) / 2 = $1,952.
    body = client.get("/api/v1/pipelines/attempts/projection", params={**q, "price": 4}).json()
    (proj,) = body["projections"].values()
    at1 = next(c for c in proj["cadences"] if c["runs_per_week"] == 1)
    assert abs(at1["expected_bill_usd"] - 1952.0) < 1e-6
