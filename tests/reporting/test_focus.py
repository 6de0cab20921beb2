"""``cadence export --format focus``: FOCUS 1.0 rows, checked by hand and by the FinOps
FOCUS validator (focus-validator, in the venv ``make`` builds beside the app's)."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from app.db.engine import Database
from app.planning.goodput import run_goodput
from app.reporting.focus import COLUMNS, billing_month, focus_row, run_facts
from app.settings import PROJECT_ROOT
from tests.fixtures.builders import make_run, make_token
from tests.reporting.test_commands import export, report

VALIDATOR_VENV = Path(os.environ.get("CADENCE_FOCUS_VENV", PROJECT_ROOT / ".venv-focus"))
OVERRIDES = PROJECT_ROOT / "deploy" / "focus" / "validator-overrides.yaml"


def worked_example_out() -> dict[str, object]:
    """The worked example's baseline as the API returns it (derived fields included)."""
    run = make_run(utilization_source="dcgm_sm_active")
    return {
        **run,
        "gpu_hours": 112.0,
        "wall_clock_hours": 14.0,
        "effective_price_per_gpu_hour": 2.5,
        "mfu": None,
    }


def test_one_row_per_run_with_costs_quantities_and_periods() -> None:
    row = focus_row(worked_example_out(), provider="Lambda")
    # 8 workers x 14 h = 112 GPU-hours at $2.50 = $280.00, the same for all four costs
    # (Cadence records the price paid and no discounts).
    for column in ("BilledCost", "EffectiveCost", "ListCost", "ContractedCost"):
        assert float(row[column]) == pytest.approx(280.0)
    assert float(row["ListUnitPrice"]) == float(row["ContractedUnitPrice"]) == 2.5
    assert float(row["ConsumedQuantity"]) == float(row["PricingQuantity"]) == 112.0
    assert row["ConsumedUnit"] == row["PricingUnit"] == "GPU-Hours"
    assert (row["ChargePeriodStart"], row["ChargePeriodEnd"]) == (
        "2026-11-02T08:00:00Z",
        "2026-11-02T22:00:00Z",
    )
    assert (row["BillingPeriodStart"], row["BillingPeriodEnd"]) == (
        "2026-11-01T00:00:00Z",
        "2026-12-01T00:00:00Z",
    )
    assert row["BillingCurrency"] == "USD" and row["ChargeCategory"] == "Usage"
    assert row["Provider"] == row["Publisher"] == row["InvoiceIssuer"] == "Lambda"
    assert row["ResourceId"] == "ranker/run-1" and row["SubAccountId"] == "ranker"
    assert row["SkuPriceId"] == "A100 at 2.5 USD per GPU-hour"
    assert json.loads(row["Tags"]) == {"team": "ranking", "variant": "baseline"}
    assert row["x_UtilizationSource"] == "dcgm_sm_active"


def test_goodput_and_badput_columns() -> None:
    row = focus_row(worked_example_out())
    # u = 0.38 of 112 GPU-hours: productive 42.56, badput (idle) 69.44; Weff = 8:
    # data stall 5 h x 8 = 40, checkpoint 1 h x 8 = 8, failure (0.5 + 0.25 + 0.25) x 8 = 8,
    # other idle 69.44 - 56 = 13.44.
    assert float(row["x_ProductiveGpuHours"]) == pytest.approx(42.56)
    assert float(row["x_BadputGpuHours"]) == pytest.approx(69.44)
    assert float(row["x_BadputDataStallGpuHours"]) == pytest.approx(40.0)
    assert float(row["x_BadputCheckpointGpuHours"]) == pytest.approx(8.0)
    assert float(row["x_BadputFailureGpuHours"]) == pytest.approx(8.0)
    assert float(row["x_BadputOtherIdleGpuHours"]) == pytest.approx(13.44)
    # Goodput is the dashboard's (tests/planning/test_goodput.py works its numbers).
    expected = run_goodput(run_facts(worked_example_out())).overall
    assert expected is not None
    assert float(row["x_Goodput"]) == pytest.approx(expected, abs=1e-9)


def test_billing_month_wraps_the_year() -> None:
    december = datetime(2026, 12, 31, 23, tzinfo=UTC)
    assert billing_month(december) == (
        datetime(2026, 12, 1, tzinfo=UTC),
        datetime(2027, 1, 1, tzinfo=UTC),
    )


def validate(path: Path) -> str:
    """The validator's report on ``path`` (it exits 0 either way: read its words)."""
    python = VALIDATOR_VENV / "bin" / "python"
    assert python.exists(), (
        f"no FOCUS validator venv at {VALIDATOR_VENV}: run `make .venv/.dev` (it builds "
        "it) or set CADENCE_FOCUS_VENV"
    )
    # It reads its currency list from a path relative to its own site-packages.
    site = subprocess.run(
        [str(python), "-c", "import focus_validator, os; "
         "print(os.path.dirname(os.path.dirname(focus_validator.__file__)))"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    answer = subprocess.run(
        [str(VALIDATOR_VENV / "bin" / "focus-validator"), "--data-file", str(path),
         "--validate-version", "1.0", "--override-file", str(OVERRIDES)],
        capture_output=True, text=True, cwd=site, timeout=300,
    )  # fmt: skip
    return answer.stdout + answer.stderr


def test_the_export_passes_the_focus_validator(
    client: TestClient, db: Database, tmp_path: Path
) -> None:
    source = tmp_path / "runs.json"
    runs = [
        make_run(pipeline="focus-a", run_id="a-1", utilization_source="nvml_gpu_util"),
        make_run(pipeline="focus-a", run_id="a-2", gpu_type="", tags={}, interruptions=[]),
        make_run(
            pipeline="focus-b", run_id="b-1", price_per_gpu_hour=4.0,
            started_at="2025-12-31T20:00:00+00:00", finished_at="2026-01-01T04:00:00+00:00",
            data_stall_hours=1.0, interruptions=[],
        ),
    ]  # fmt: skip
    source.write_text(json.dumps(runs))
    assert report(client, make_token(db, "ingest"), "--file", str(source), "--quiet") == 0
    target = tmp_path / "focus.csv"
    assert export(client, "--format", "focus", "--output", str(target), "--quiet") == 0
    rows = list(csv.DictReader(io.StringIO(target.read_text(encoding="utf-8"))))
    assert tuple(rows[0]) == COLUMNS
    ours = [r for r in rows if r["x_Pipeline"] in ("focus-a", "focus-b")]
    assert sorted(r["x_RunId"] for r in ours) == ["a-1", "a-2", "b-1"]
    b1 = next(r for r in ours if r["x_RunId"] == "b-1")
    assert float(b1["BilledCost"]) == pytest.approx(8 * 8 * 4.0)  # 8 workers x 8 h x $4
    assert b1["BillingPeriodStart"] == "2025-12-01T00:00:00Z"  # the month it started in

    report_text = validate(target)
    assert "Validation succeeded." in report_text, report_text

    # The validator really checks: a lower-case currency code fails it.
    broken = tmp_path / "broken.csv"
    broken.write_text(target.read_text(encoding="utf-8").replace(",USD,", ",usd,"))
    assert "Validation failed!" in validate(broken)
