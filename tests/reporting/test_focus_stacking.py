"""The FOCUS export stacked with the cloud's own FOCUS 1.2 bill, as a FinOps tool does
(DuckDB, a test-only dependency): nothing counted twice, and the join keys match."""

from __future__ import annotations

import csv
from pathlib import Path

import duckdb
import pytest

from app.reporting.focus import COLUMNS, focus_rows
from tests.fixtures.bills import (
    AWS_ACCOUNT,
    AWS_PAYER,
    aws_instance,
    aws_other,
    aws_row,
    write_bill,
)
from tests.fixtures.builders import worked_example_out

DAY = ("2026-11-02T00:00:00.000Z", "2026-11-03T00:00:00.000Z")


def test_stacked_with_an_aws_bill_nothing_is_counted_twice(tmp_path: Path) -> None:
    # The bill: two p4d.24xlarge for the day, $786.5424 each at list ($32.7726/h x 24),
    # one under a 30% discount ($550.57968), and $12.00 of S3. BilledCost 786.5424 +
    # 550.57968 + 12 = 1,349.12208; EffectiveCost the same (no amortised commitment).
    bill = write_bill(tmp_path / "aws.csv", [
        aws_row("i-0a1", *DAY, hours=24, list_cost=786.5424),
        aws_row("i-0b2", *DAY, hours=24, list_cost=786.5424, effective=550.57968),
        aws_other(*DAY, 12.0),
    ])  # fmt: skip
    run = {
        **worked_example_out(),
        "tags": {
            "cloud_resource_id": f"{aws_instance('i-0a1')},{aws_instance('i-0b2')}",
            "cloud_account_id": AWS_ACCOUNT,
            "cloud_billing_account_id": AWS_PAYER,
            "cloud_region": "us-east-1",
        },
    }
    export = tmp_path / "cadence.csv"
    with export.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(focus_rows(run, provider="AWS"))

    con = duckdb.connect()
    con.execute(f"CREATE VIEW bill AS SELECT * FROM read_csv_auto('{bill}', all_varchar=true)")
    con.execute(f"CREATE VIEW ours AS SELECT * FROM read_csv_auto('{export}', all_varchar=true)")
    con.execute("CREATE VIEW stacked AS SELECT * FROM bill UNION ALL BY NAME SELECT * FROM ours")
    billed, effective = con.execute(
        "SELECT sum(BilledCost::DOUBLE), sum(EffectiveCost::DOUBLE) FROM stacked"
    ).fetchone()  # type: ignore[misc]
    assert billed == pytest.approx(1349.12208)  # the invoice, not a cent more
    assert effective == pytest.approx(1349.12208)
    # Per provider: Cadence's rows land under the bill's ProviderName, not an empty one.
    providers = con.execute(
        "SELECT ProviderName, count(*) FROM stacked GROUP BY 1 ORDER BY 1"
    ).fetchall()
    assert providers == [("AWS", 5)]
    # Every allocation row joins its instance's bill line on the bill's own keys; the
    # allocated $280 (112 GPU-hours at $2.50) sits beside the billed $1,337.12208 of GPUs.
    joined = con.execute(
        """SELECT o.ResourceId, sum(o.x_AllocatedCost::DOUBLE), sum(b.EffectiveCost::DOUBLE)
           FROM ours o JOIN bill b USING (ResourceId, SubAccountId, BillingAccountId, RegionId,
                                          ProviderName)
           GROUP BY 1 ORDER BY 1"""
    ).fetchall()
    assert [r[0] for r in joined] == [aws_instance("i-0a1"), aws_instance("i-0b2")]
    assert sum(r[1] for r in joined) == pytest.approx(280.0)
    assert sum(r[2] for r in joined) == pytest.approx(786.5424 + 550.57968)
