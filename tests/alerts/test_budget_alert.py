"""The budget alert that fires before the money is spent: this month's bill likely over
the budget (app.analytics.month, the status every page shows)."""

from __future__ import annotations

from fastapi.testclient import TestClient

from app.alerts.rules import AlertKind, Metrics, describe, is_firing
from tests.fixtures.alerts import Receiver, add_rule, drain, setup_pipeline
from tests.fixtures.builders import make_run, this_month_run


def test_the_rule_reads_the_chance_of_ending_over() -> None:
    # P(over) 64%: at a 50% threshold it fires (>=: "likely over" means at least even).
    m = Metrics(month_p_over=0.64, budget_usd=1400.0, month_spent_usd=900.0,
                month_expected_usd=1500.0, month_status="likely_over")  # fmt: skip
    value = m.value(AlertKind.BUDGET_LIKELY_OVER)
    assert value == 64.0 and is_firing(AlertKind.BUDGET_LIKELY_OVER, value, 50.0)
    assert not is_firing(AlertKind.BUDGET_LIKELY_OVER, 9.0, 50.0)
    assert is_firing(AlertKind.BUDGET_LIKELY_OVER, 50.0, 50.0)
    words = describe(AlertKind.BUDGET_LIKELY_OVER, value, 50.0, m)
    assert words.startswith("this month is likely over the $1,400 budget: a 64% chance")
    assert "spent $900, $1,500 expected by the end" in words


def test_spend_already_over_the_budget_fires(
    app_client: TestClient,
    admin_headers: dict[str, str],
    ingest_headers: dict[str, str],
    receiver: Receiver,
) -> None:
    c = app_client
    # Budget $200; one run this month of 112 GPU-h at $2.50 = $280: over already.
    setup_pipeline(c, admin_headers, budget=200.0)
    add_rule(c, admin_headers, kind="budget_likely_over", threshold=50, webhook_url=receiver.url)
    run = make_run(run_id="this-month", **this_month_run(), workers=8, gpu_hours=112.0)
    assert c.post("/api/v1/runs", json=run, headers=ingest_headers).status_code == 201
    drain(c)
    [hook] = receiver.requests
    assert hook["event"] == "firing" and hook["kind"] == "budget_likely_over"
    assert "this month is over the $200 budget: a 100% chance" in hook["text"]
    # The projection API says the same word.
    mtd = c.get("/api/v1/pipelines/ranker/projection").json()["month_to_date"]
    assert mtd["status"] == "over" and mtd["spend_to_date_usd"] >= 280.0 - 1e-6
