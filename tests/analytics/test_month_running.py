"""The issue's month (issue 34, DOMAIN.md section 9): on Nov 16 a retraining has been
running for six hours. Read through the same functions the API, the page and the
portfolio use (``analytics.month.months`` and ``month_to_date_of``), at a pinned clock.

The pipeline: budget $1,600, 2 retrainings a week, each 8 workers x 14 h at $1.5714 =
$175.9968 ("$176"); twelve finished before Nov 16 (four in November: $703.99) and a
probe on Nov 1 of $24.01 (1 worker x 10 h x $2.40128), more than 14 days before: $728
spent. Four retrainings still to start (Nov 19 06:00, 22 18:00, 26 06:00, 29 18:00,
every 3.5 days after the running one started Nov 15 18:00): 4 x $176 = $704.

- Without the running attempt: $728 + $704 = $1,432, within.
- With it (started 6 h ago: 8 x 6 x 1.5714 = $75.43 so far, counted $176): $1,608
  against $1,600, over in every draw (every retraining costs the same): likely_over,
  not over (spend to date $803.43 is within the budget).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.analytics import costs
from app.analytics.month import month_to_date_of, months
from app.db import rollup_reads
from app.db.engine import Database
from app.pipelines.service import briefs, get_by_name
from app.planning.budget_status import BudgetStatus
from app.planning.scenario import RUN_WINDOW
from tests.fixtures.builders import make_run

NOW = datetime(2026, 11, 16, tzinfo=UTC)
RUNNING_START = datetime(2026, 11, 15, 18, tzinfo=UTC)
PRICE = 1.5714
TYPICAL = 8 * 14 * PRICE


def retraining(i: int, start: datetime, **extra: Any) -> dict[str, Any]:
    return make_run(
        pipeline="nov", run_id=f"nov-{i}", started_at=start.isoformat(),
        finished_at=(start + timedelta(hours=14)).isoformat(), workers=8,
        price_per_gpu_hour=PRICE, data_stall_hours=0.0, checkpoint_hours=0.0,
        interruptions=[], **extra,
    )  # fmt: skip


def seed(client: TestClient, admin: dict[str, str], ingest: dict[str, str]) -> None:
    body = {"runs_per_week": 2, "monthly_budget_usd": 1600.0}
    runs = [retraining(i, RUNNING_START - timedelta(days=3.5 * (i + 1))) for i in range(12)]
    probe = make_run(
        pipeline="nov", run_id="probe-1", variant="probe", workers=1,
        started_at="2026-11-01T00:00:00+00:00", finished_at="2026-11-01T10:00:00+00:00",
        price_per_gpu_hour=2.40128, data_stall_hours=0.0, checkpoint_hours=0.0, interruptions=[],
    )  # fmt: skip
    r = client.post("/api/v1/runs/batch", json={"runs": [*runs, probe]}, headers=ingest)
    assert r.status_code == 201, r.text
    assert client.put("/api/v1/pipelines/nov", json=body, headers=admin).is_success


def start(client: TestClient, ingest: dict[str, str], at: datetime, run_id: str) -> None:
    run = retraining(99, at)
    started = {k: v for k, v in run.items() if k not in ("finished_at", "gpu_utilization")}
    r = client.post(
        "/api/v1/runs", json={**started, "run_id": run_id, "outcome": "running"}, headers=ingest
    )
    assert r.status_code == 201, r.text


def month_now(db: Database, now: datetime = NOW) -> Any:
    with db.read() as s:
        listed = briefs(s, only=["nov"])
        org = months(s, listed, now)[listed[0].id]
        p = get_by_name(s, "nov")
        window = costs.windows(s, listed, RUN_WINDOW)[p.id]
        spend = rollup_reads.month_spend_by_variant(s, now.date().replace(day=1), [p.id])[p.id]
        started = rollup_reads.newest_starts(s, [p.id])[p.id]["baseline"]
        page = month_to_date_of(s, p, spend, window, None, started, now)  # no declared change
    assert org == page  # the portfolio's and the page's month are one
    return org


def test_the_running_retraining_puts_nov_16_at_likely_over(
    client: TestClient, db: Database, admin_headers: Any, ingest_headers: Any
) -> None:
    seed(client, admin_headers, ingest_headers)
    before = month_now(db)
    assert before.spend_to_date_usd == pytest.approx(728.0)
    assert before.expected_end_of_month_usd == pytest.approx(728 + 4 * TYPICAL)  # $1,432
    assert before.status is BudgetStatus.WITHIN and before.remaining_runs == 4
    start(client, ingest_headers, RUNNING_START, "nov-running")
    m = month_now(db)
    assert m.running_attempts == 1 and m.remaining_runs == 4
    assert m.running_so_far_usd == pytest.approx(8 * 6 * PRICE)  # $75.43
    assert m.spend_to_date_usd == pytest.approx(728 + 8 * 6 * PRICE)  # $803.43
    assert m.expected_end_of_month_usd == pytest.approx(728 + 5 * TYPICAL)  # $1,607.98
    assert round(m.expected_end_of_month_usd) == 1608
    assert m.status is BudgetStatus.LIKELY_OVER and m.p_over_budget == 1.0
    assert m.warnings == () and m.experiments_expected_usd == 0.0


def test_a_retraining_running_far_past_its_usual_length_is_flagged(
    client: TestClient, db: Database, admin_headers: Any, ingest_headers: Any
) -> None:
    seed(client, admin_headers, ingest_headers)
    start(client, ingest_headers, NOW - timedelta(hours=40), "nov-stuck")
    m = month_now(db)
    [warning] = m.warnings
    assert "running 40 h; retrainings usually take 14 h" in warning
    # It counts what it has cost (8 x 40 x 1.5714 = $502.85), more than a typical one.
    assert m.running_expected_usd == pytest.approx(8 * 40 * PRICE)


def test_an_experiment_goes_on_at_its_pace(
    client: TestClient, db: Database, admin_headers: Any, ingest_headers: Any
) -> None:
    # A candidate ran twice in the last 14 days (Nov 9 and Nov 13, 2 workers x 10 h x
    # $5 = $100 each): 15 days left -> 2/14 x 15 x $100 = $214.29 more, shown apart
    # and in the expected end ($1,432 + $200 spent + $214.29).
    seed(client, admin_headers, ingest_headers)
    for day in (9, 13):
        run = make_run(
            pipeline="nov", run_id=f"cand-{day}", variant="candidate", workers=2,
            started_at=f"2026-11-{day:02d}T00:00:00+00:00",
            finished_at=f"2026-11-{day:02d}T10:00:00+00:00", price_per_gpu_hour=5.0,
            data_stall_hours=0.0, checkpoint_hours=0.0, interruptions=[],
        )  # fmt: skip
        assert client.post("/api/v1/runs", json=run, headers=ingest_headers).status_code == 201
    m = month_now(db)
    assert m.experiments_expected_usd == pytest.approx(200 * 15 / 14)
    assert m.expected_end_of_month_usd == pytest.approx(928 + 4 * TYPICAL + 200 * 15 / 14)
