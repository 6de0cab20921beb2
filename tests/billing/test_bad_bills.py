"""Bills Cadence refuses: a clear message naming the file, row and column, and nothing
stored from that file (the good files beside it still are)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from sqlalchemy import func, select

from app.billing.command import import_files
from app.billing.gpu_catalog import gpus_per_unit
from app.billing.stream import BillError
from app.db.engine import Database
from app.db.models import BillLine
from tests.fixtures.bills import (
    AWS_COLUMNS,
    AZURE_COLUMNS,
    aws_row,
    azure_row,
    read_bill,
    write_bill,
)

DAY = ("2026-11-02T00:00:00.000Z", "2026-11-03T00:00:00.000Z")


def stored(db: Database) -> int:
    with db.read() as session:
        return int(session.scalar(select(func.count()).select_from(BillLine)) or 0)


def refused(path: Path) -> str:
    with pytest.raises(BillError) as caught:
        read_bill(path)
    return caught.value.message


def test_a_file_that_is_not_focus(tmp_path: Path) -> None:
    path = tmp_path / "runs.csv"
    path.write_text("pipeline,run_id,workers\nranker,run-1,8\n")
    message = refused(path)
    assert str(path) in message and "not a FOCUS file" in message
    assert "pipeline, run_id, workers" in message  # what it found instead


def test_a_draft_and_a_later_version(tmp_path: Path) -> None:
    draft = tmp_path / "focus-0.5.csv"
    draft.write_text("BilledCost,ChargeType,Provider,ChargePeriodStart\n1,Usage,AWS,x\n")
    assert "a FOCUS draft before 1.0 (Provider, ChargeType)" in refused(draft)
    assert "Cadence reads FOCUS 1.0 to 1.2" in refused(draft)
    later = tmp_path / "focus-1.3.csv"
    later.write_text("BilledCost,ServiceProviderName,ChargePeriodStart\n1,AWS,x\n")
    assert "FOCUS 1.3 or later (ServiceProviderName)" in refused(later)


def test_a_needed_column_missing(tmp_path: Path) -> None:
    path = write_bill(tmp_path / "no-resource.csv", [aws_row("i-1", *DAY, hours=24, list_cost=96)],
                      [c for c in AWS_COLUMNS if c != "ResourceId"])  # fmt: skip
    assert "column ResourceId missing" in refused(path)


def test_a_currency_mix_names_the_row(tmp_path: Path, db: Database) -> None:
    path = write_bill(tmp_path / "mixed.csv", [
        aws_row("i-1", *DAY, hours=24, list_cost=960),
        aws_row("i-2", *DAY, hours=24, list_cost=900, currency="EUR"),
    ])  # fmt: skip
    message = refused(path)
    assert f"{path} row 2, column BillingCurrency: EUR after USD" in message
    good = write_bill(tmp_path / "good.csv", [aws_row("i-3", *DAY, hours=24, list_cost=960)])
    # The bad file stores nothing, the good one beside it its line; exit code 1.
    assert import_files(db, [path, good]) == 1
    assert stored(db) == 1


def test_a_bill_in_euros_with_azures_usd_columns(tmp_path: Path) -> None:
    # Azure bills in the account's currency and adds x_BilledCostInUsd and
    # x_EffectiveCostInUsd: EUR 552 billed is USD 600 here, and the USD is stored.
    row = {**azure_row("vm-1", "2026-11-05T00:00:00Z", "2026-11-06T00:00:00Z", hours=24,
                       cost=552.0), "BillingCurrency": "EUR"}  # fmt: skip
    row.update(x_BilledCostInUsd=600.0, x_EffectiveCostInUsd=600.0)
    columns = (*AZURE_COLUMNS, "x_BilledCostInUsd", "x_EffectiveCostInUsd")
    (line,) = read_bill(write_bill(tmp_path / "azure-eur.csv", [row], columns)).lines
    assert (line.currency, line.effective_cost, line.billed_cost) == ("USD", 600.0, 600.0)


def test_a_bill_in_another_currency(tmp_path: Path) -> None:
    path = write_bill(tmp_path / "eur.csv", [aws_row("i-1", *DAY, hours=24, list_cost=960,
                                                     currency="EUR")])  # fmt: skip
    assert refused(path).startswith(
        f"{path} row 1, column BillingCurrency: EUR: Cadence's figures are USD"
    )


@pytest.mark.parametrize(
    ("column", "value", "reason"),
    [
        ("EffectiveCost", "", "empty; a number is needed"),
        ("EffectiveCost", "12,50", "'12,50' is not a number"),
        ("ChargePeriodStart", "yesterday", "'yesterday' is not an ISO 8601 timestamp"),
        ("ChargePeriodEnd", "2026-11-01T00:00:00Z", "before ChargePeriodStart"),
        ("Tags", "{not json", "not JSON"),
    ],
)
def test_a_row_without_a_needed_value(
    tmp_path: Path, db: Database, column: str, value: str, reason: str
) -> None:
    rows = [aws_row("i-1", *DAY, hours=24, list_cost=960) for _ in range(3)]
    rows[1]["ResourceId"] += "-b"
    rows[2] = {**rows[2], column: value}
    path = write_bill(tmp_path / "bad.csv", rows)
    assert refused(path) == f"{path} row 3, column {column}: {reason}"
    assert import_files(db, [path]) == 1
    assert stored(db) == 0  # rows 1 and 2 were fine: still nothing of the file


def test_a_file_that_cannot_be_read(tmp_path: Path) -> None:
    assert "cannot read" in refused(tmp_path / "missing.csv")
    binary = tmp_path / "bill.parquet"
    binary.write_bytes(b"PAR1 not really")
    assert "not a readable Parquet file" in refused(binary)
    latin = tmp_path / "latin.csv"
    with latin.open("w", encoding="latin-1", newline="") as handle:
        csv.writer(handle).writerow(["BilledCost", "Caf\xe9"])
    assert "not UTF-8" in refused(latin)


def test_which_lines_are_gpu_lines() -> None:
    assert gpus_per_unit(["USE1-BoxUsage:p4d.24xlarge"]) == 8
    assert gpus_per_unit(["$1.006 per On Demand Linux g5.xlarge Instance Hour"]) == 1
    assert gpus_per_unit(["Virtual Machines NDasrA100v4 Series", "ND96asr A100 v4"]) == 8
    assert gpus_per_unit(["NC24ads A100 v4"]) == 1
    assert gpus_per_unit(["a3-highgpu-8g"]) == 8
    assert gpus_per_unit(["Nvidia Tesla A100 GPU running in Americas"]) == 1
    assert gpus_per_unit(["USE1-BoxUsage:m5.xlarge", "TimedStorage-ByteHrs"]) is None
