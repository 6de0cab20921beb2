"""``cadence import focus`` through the real command line, on a SQLite file of its own."""

from __future__ import annotations

from pathlib import Path

import pytest

from app import cli
from tests.fixtures.bills import aws_row, write_bill

DAY = ("2026-11-02T00:00:00.000Z", "2026-11-03T00:00:00.000Z")


def test_import_focus_beside_import_mlflow() -> None:
    args = cli.parser().parse_args(["import", "focus", "a.csv", "b.parquet"])
    assert args.files == [Path("a.csv"), Path("b.parquet")]
    assert cli.parser().parse_args(["import", "mlflow", "--tracking-uri", "x", "--experiment",
                                    "e", "--pipeline", "p"]).import_source == "mlflow"  # fmt: skip


def test_import_twice_then_a_bad_file(
    cli_db: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cli.main(["migrate"]) == 0
    bill = write_bill(tmp_path / "aws.csv", [aws_row("i-1", *DAY, hours=24, list_cost=960)])
    assert cli.main(["import", "focus", str(bill)]) == 0
    assert f"{bill}: FOCUS 1.2, 1 row, 1 GPU line items, 1 new" in capsys.readouterr().out
    assert cli.main(["import", "focus", str(bill)]) == 0
    assert "0 new, 1 already stored" in capsys.readouterr().out
    bad = tmp_path / "runs.csv"
    bad.write_text("pipeline,run_id\nranker,1\n")
    assert cli.main(["import", "focus", str(bad)]) == 1
    err = capsys.readouterr().err
    assert f"{bad}: not a FOCUS file" in err and "nothing stored from it" in err
