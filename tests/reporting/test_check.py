"""``cadence check``: the CI cost gate against the real projection endpoint."""

from __future__ import annotations

import re

import httpx
import pytest
from cadence_client.commands.check import run_check
from fastapi.testclient import TestClient

from app.db.engine import Database
from tests.fixtures.builders import make_run, make_token
from tests.fixtures.client import URL, args, through

PIPE = "check-pipe"


@pytest.fixture
def seeded(client: TestClient, db: Database) -> TestClient:
    """Three runs of the worked example's baseline (8 workers x 14 h at 38%, $2.50)."""
    headers = {"Authorization": f"Bearer {make_token(db, 'ingest')}"}
    for day in (2, 3, 4):
        run = make_run(
            pipeline=PIPE, run_id=f"r{day}", interruptions=[],
            started_at=f"2026-11-0{day}T08:00:00+00:00",
            finished_at=f"2026-11-0{day}T22:00:00+00:00",
        )  # fmt: skip
        assert client.post("/api/v1/runs", json=run, headers=headers).status_code == 201
    return client


def check(client: TestClient, *argv: str) -> int:
    namespace = args("check", "--url", URL, "--pipeline", PIPE, *argv)
    return run_check(namespace, transport=through(client, []), sleep=pytest.fail)


def test_twice_weekly_at_70_percent_is_within_a_10_percent_limit(
    seeded: TestClient, capsys: pytest.CaptureFixture[str]
) -> None:
    code = check(
        seeded, "--cadence", "2", "--utilization-target", "0.7", "--max-increase-pct", "10"
    )
    out = capsys.readouterr().out
    assert code == 0
    # Today: 112 GPU-h x $2.50 = $280 a run, x 52/12 = $1,213.33 a month. Proposed:
    # 112 x 38/70 = 60.8 GPU-h x $2.50 = $152 a run, x 2 x 52/12 = $1,317.33 (+$104, +8.6%).
    assert "| Today | 1×/week, as recorded | $1,213.33 |" in out
    assert "| Proposed | 2×/week, utilization 70% | $1,317.33 |" in out
    assert "| Change | | +$104.00 (+8.6%) |" in out
    assert "**PASS**: within the limits (+10%)." in out


def test_over_a_limit_exits_1_and_says_which(
    seeded: TestClient, capsys: pytest.CaptureFixture[str]
) -> None:
    code = check(
        seeded, "--cadence", "2", "--utilization-target", "0.7",
        "--max-increase-pct", "5", "--max-monthly-usd", "2000",
    )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 1
    assert "**OVER LIMIT**: the expected bill rises +8.6%, over the 5% limit." in out


def test_doubling_the_cadence_doubles_the_cost(
    seeded: TestClient, capsys: pytest.CaptureFixture[str]
) -> None:
    # $280 x 2 x 52/12 = $2,426.67, +$1,213.33 over today: over a $1,000 rise limit.
    assert check(seeded, "--cadence", "2", "--max-increase-usd", "1000") == 1
    out = capsys.readouterr().out
    assert "| Proposed | 2×/week | $2,426.67 |" in out
    assert "over the $1,000.00 limit" in out
    # Without --cadence the proposal is today's cadence: no change, a pass.
    assert check(seeded, "--max-increase-pct", "0") == 0
    assert "| Change | | +$0.00 (+0.0%) |" in capsys.readouterr().out


def test_errors_keep_the_cli_exit_codes(
    seeded: TestClient, db: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    namespace = args("check", "--url", URL, "--pipeline", "no-such-pipe", "--cadence", "2")
    assert run_check(namespace, transport=through(seeded, []), sleep=pytest.fail) == 2
    assert "cannot project 'no-such-pipe'" in capsys.readouterr().err
    assert check(seeded, "--cadence", "2", "--workers", "0") == 2  # refused by the server
    bad_url = args("check", "--url", "ftp://x", "--pipeline", PIPE, "--cadence", "2")
    assert run_check(bad_url, sleep=pytest.fail) == 2
    assert "bad --url" in capsys.readouterr().err


def set_budget(client: TestClient, db: Database, usd: float) -> None:
    headers = {"Authorization": f"Bearer {make_token(db, 'admin')}"}
    answer = client.put(
        f"/api/v1/pipelines/{PIPE}", json={"monthly_budget_usd": usd}, headers=headers
    )
    assert answer.status_code == 200, answer.text


def test_the_pipelines_budget_is_judged_by_default(
    seeded: TestClient, db: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    # Judged by the one test, P(bill > budget) against the 10% risk tolerance. Twice
    # weekly: 9 runs in a month with probability 2/3, else 8, each $280: $2,240 or $2,520,
    # both over a $2,000 budget (P = 100%); the bill at risk (p90) is 9 x 280 = $2,520.
    # Once weekly (4 or 5 runs: at most $1,400) P = 0: within.
    set_budget(seeded, db, 2000)
    assert check(seeded, "--cadence", "2") == 1
    out = capsys.readouterr().out
    assert (
        "the proposed month has a 100% chance of going over the pipeline's $2,000.00 budget "
        "(the risk tolerance is 10%; bill at risk $2,520.00)"
    ) in out
    assert "a ceiling is held against the bill at risk $2,520.00 a month." in out
    assert check(seeded, "--cadence", "1") == 0
    assert "**PASS**: within the limits (budget $2,000.00/month)." in capsys.readouterr().out
    assert check(seeded, "--cadence", "2", "--no-budget") == 0  # asked not to judge it
    assert "none given" in capsys.readouterr().out
    # The expected-bill basis no longer changes the verdict: at $2,450 the expected bill
    # $2,426.67 is under the budget, but 9 runs ($2,520, probability 2/3) go over it:
    # P = 2/3 >= 10%, so twice weekly does not fit, as the pages and the gate say.
    headers = {"Authorization": f"Bearer {make_token(db, 'admin', name='basis-admin')}"}
    body = {"monthly_budget_usd": 2450, "gate_cost_basis": "expected_bill"}
    assert seeded.put(f"/api/v1/pipelines/{PIPE}", json=body, headers=headers).is_success
    assert check(seeded, "--cadence", "2") == 1
    # (the simulated months give about 2/3: 66% or 67%)
    said = capsys.readouterr().out
    assert re.search(r"a 6[67]% chance of going over the pipeline's \$2,450\.00 budget", said)


def test_variant_projects_that_variants_runs(
    seeded: TestClient, db: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    headers = {"Authorization": f"Bearer {make_token(db, 'ingest', name='candidate-ingest')}"}
    for day in (5, 6, 7):  # the candidate: 16 workers, the same 14 h at 38%: twice the cost
        run = make_run(
            pipeline=PIPE, run_id=f"c{day}", variant="candidate", workers=16, interruptions=[],
            started_at=f"2026-11-0{day}T08:00:00+00:00",
            finished_at=f"2026-11-0{day}T22:00:00+00:00",
        )  # fmt: skip
        assert seeded.post("/api/v1/runs", json=run, headers=headers).status_code == 201
    # 224 GPU-h x $2.50 = $560 a run, x 52/12 = $2,426.67 a month at once weekly.
    assert check(seeded, "--variant", "candidate", "--cadence", "1") == 0
    out = capsys.readouterr().out
    assert "### Cadence cost check: `check-pipe` (variant `candidate`)" in out
    assert "| Proposed | 1×/week | $2,426.67 |" in out
    # Today is production's (baseline, $280 a run: 52/12 x 280 = $1,213.33), as the page
    # measures it, not the candidate's own: +$1,213.33, +100.0%.
    assert "| Today | 1×/week, as recorded | $1,213.33 |" in out
    assert "+$1,213.33 (+100.0%)" in out
    assert check(seeded, "--variant", "nope", "--cadence", "1") == 2


def test_the_expected_bill_is_judged_when_the_server_gives_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A server that prices failed attempts answers ``expected_bill_usd`` beside the
    median cost; the check judges the bill (here $1,500 against a $1,400 limit)."""
    answer = {
        "current_variant": "baseline",
        "scenario": {"budget_usd": None},
        "projections": {
            "baseline": {
                "current_monthly_cost_usd": 1000.0,
                "current_runs_per_week": 1.0,
                "runs_used": 3,
                "warnings": [],
                "cadences": [
                    {
                        "runs_per_week": 1.0,
                        "monthly_cost_usd": 1200.0,
                        "expected_bill_usd": 1500.0,
                        "monthly_cost_p10_usd": 1100.0,
                        "monthly_cost_p90_usd": 1600.0,
                    },
                ],
            }
        },
    }

    def server(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=answer)

    namespace = args("check", "--url", URL, "--pipeline", PIPE, "--cadence", "1",
                     "--max-monthly-usd", "1400")  # fmt: skip
    assert run_check(namespace, transport=httpx.MockTransport(server), sleep=pytest.fail) == 1
    assert (
        "the proposed expected bill $1,500.00 a month is over the $1,400.00 limit"
        in capsys.readouterr().out
    )
