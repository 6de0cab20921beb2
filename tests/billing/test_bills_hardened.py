"""Bills that cannot be, and bills told twice (issue 36 item 2): bounds, repeated columns,
one charge stored once whatever the export's shape, restated periods replaced and said,
the explained-hours warning, counts of what was stored, and totals kept at import."""

from __future__ import annotations

import threading
import tracemalloc
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import delete, func, select

from app.billing import service
from app.billing.command import import_files
from app.billing.reader import BillFile
from app.billing.stream import BillError
from app.db.engine import Database
from app.db.models import BillLine, BillTotal
from app.reporting.focus import FOCUS_1_0
from tests.fixtures.bills import AWS_COLUMNS, aws_instance, aws_row, read_bill, write_bill
from tests.fixtures.builders import make_run

NOV2 = ("2026-11-02T00:00:00Z", "2026-11-03T00:00:00Z")


def _hourly(instance: str = "i-0a1", cost: float = 30.0) -> list[dict[str, object]]:
    return [
        aws_row(instance, f"2026-11-02T{h:02d}:00:00Z", f"2026-11-02T{h + 1:02d}:00:00Z"
                if h < 23 else "2026-11-03T00:00:00Z", hours=1, list_cost=cost)
        for h in range(24)
    ]  # fmt: skip


def _count(db: Database) -> tuple[int, float]:
    with db.read() as s:
        n = s.scalar(select(func.count()).select_from(BillLine)) or 0
        return int(n), float(s.scalar(select(func.sum(BillLine.effective_cost))) or 0.0)


@pytest.mark.parametrize(
    ("column", "value"),
    [("BilledCost", "1e308"), ("EffectiveCost", "-1e300"), ("BilledCost", "Infinity"),
     ("ConsumedQuantity", "1e308"), ("EffectiveCost", "nan")],
)  # fmt: skip
def test_money_and_quantities_beyond_bounds_are_refused_with_row_and_column(
    tmp_path: Path, db: Database, column: str, value: str
) -> None:
    row = aws_row("i-0a1", *NOV2, hours=24, list_cost=720.0)
    path = write_bill(tmp_path / "huge.csv", [aws_row("i-0b2", *NOV2, hours=24, list_cost=1.0),
                                              {**row, column: value}])  # fmt: skip
    with pytest.raises(BillError) as caught:
        read_bill(path)
    assert f"row 2, column {column}" in caught.value.message
    assert import_files(db, [path]) == 1
    assert _count(db) == (0, 0.0)  # all or nothing: row 1 was good, nothing stored


def test_a_repeated_column_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "twice.csv"
    row = aws_row("i-0a1", *NOV2, hours=24, list_cost=720.0)
    header = [*AWS_COLUMNS, "BilledCost"]
    path.write_text(",".join(header) + "\n" + ",".join(str(row.get(c, "")) for c in header)
                    + "\n")  # fmt: skip
    with pytest.raises(BillError, match="column BilledCost appears more than once"):
        read_bill(path)


@pytest.mark.parametrize(
    ("column", "value", "reason"),
    [("ChargePeriodStart", "9999-12-31T23:00:00-05:00", "not an ISO 8601"),
     ("ChargePeriodStart", "0001-01-01T00:00:00+05:00", "not an ISO 8601"),
     ("ChargePeriodEnd", "9999-01-01T00:00:00Z", "outside 2000"),
     ("Tags", "5", "neither a JSON object"), ("Tags", "[1,2]", "neither a JSON object"),
     ("Tags", "[" * 60_000 + "]" * 60_000, "at most"),
     ("Tags", "[" * 30_000 + "]" * 30_000, "nested too deep")],
)  # fmt: skip
def test_hostile_dates_and_tags_name_the_column(
    tmp_path: Path, column: str, value: str, reason: str
) -> None:
    row = {**aws_row("i-0a1", *NOV2, hours=24, list_cost=720.0), column: value}
    with pytest.raises(BillError, match=f"row 1, column {column}: .*{reason}"):
        read_bill(write_bill(tmp_path / "bad.csv", [row]))


def test_null_tags_are_no_tags_and_utf16_is_named(tmp_path: Path) -> None:
    row = {**aws_row("i-0a1", *NOV2, hours=24, list_cost=720.0), "Tags": "null"}
    (line,) = read_bill(write_bill(tmp_path / "null.csv", [row])).lines
    assert line.pipeline_tag is None
    utf16 = tmp_path / "utf16.csv"
    utf16.write_text((tmp_path / "null.csv").read_text(), encoding="utf-16")
    with pytest.raises(BillError, match="UTF-16"):
        read_bill(utf16)


def test_focus_1_0_and_1_2_exports_of_one_month_store_each_charge_once(
    tmp_path: Path, db: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [aws_row("i-0a1", *NOV2, hours=24, list_cost=960.0, effective=720.0)]
    old = write_bill(tmp_path / "focus-1.0.csv", rows, FOCUS_1_0)
    new = write_bill(tmp_path / "focus-1.2.csv", rows, AWS_COLUMNS)
    assert import_files(db, [old, new]) == 0
    out = capsys.readouterr().out
    assert "FOCUS 1.0" in out and "FOCUS 1.2, 1 row, 1 GPU line items, 0 new, 1 already" in out
    assert _count(db) == (1, 720.0)  # not $1,440


def test_hourly_then_daily_rows_replace_each_other_and_say_so(
    tmp_path: Path, db: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    # 24 hourly lines of $30 (= $720), then the same day as one daily line of $720.
    hourly = write_bill(tmp_path / "hourly.csv", _hourly())
    daily = write_bill(tmp_path / "daily.csv", [aws_row("i-0a1", *NOV2, hours=24,
                                                         list_cost=720.0)])  # fmt: skip
    assert import_files(db, [hourly]) == 0
    assert _count(db) == (24, 720.0)
    assert import_files(db, [daily]) == 0
    assert "1 new, 0 already stored; 24 lines of earlier imports" in capsys.readouterr().out
    assert _count(db) == (1, 720.0)  # not $1,440
    assert import_files(db, [hourly]) == 0  # and back: the daily line is replaced
    assert "24 new, 0 already stored; 1 lines of earlier imports" in capsys.readouterr().out
    assert _count(db) == (24, 720.0)


def test_a_changed_figure_replaces_the_stored_one(
    tmp_path: Path, db: Database, capsys: pytest.CaptureFixture[str]
) -> None:
    first = write_bill(tmp_path / "a.csv", [aws_row("i-0a1", *NOV2, hours=24, list_cost=720.0)])
    again = write_bill(tmp_path / "b.csv", [aws_row("i-0a1", *NOV2, hours=24, list_cost=700.0)])
    assert import_files(db, [first, again]) == 0
    assert "1 stored with other figures (replaced" in capsys.readouterr().out
    assert _count(db) == (1, 700.0)


def test_explained_gpu_hours_beyond_the_runs_own_warn(
    client: TestClient, db: Database, ingest_headers: dict[str, str], tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    # One run of 1 worker for 10 h (10 GPU-hours) holds a p4d.24xlarge (8 GPUs) billed
    # for the day: 192 GPU-hours x 10/24 = 80 explained, more than the 10 recorded.
    run = make_run(run_id="one-gpu", workers=1, started_at="2026-11-02T08:00:00+00:00",
                   finished_at="2026-11-02T18:00:00+00:00", interruptions=[],
                   data_stall_hours=0.0, checkpoint_hours=0.0,
                   tags={"cloud_resource_id": aws_instance("i-0a1")})  # fmt: skip
    assert client.post("/api/v1/runs", json=run, headers=ingest_headers).status_code == 201
    bill = write_bill(tmp_path / "day.csv", [aws_row("i-0a1", *NOV2, hours=24, list_cost=720.0)])
    assert import_files(db, [bill]) == 0
    said = "ranker: the bill explains 80 GPU-hours in 2026-11, more than the 10 its runs"
    assert said in capsys.readouterr().out
    answer = client.get("/api/v1/reconciliation?month=2026-11").json()
    assert answer["warnings"] == [pytest.approx(answer["warnings"][0])] and said in answer[
        "warnings"][0]  # fmt: skip
    page = client.get("/api/v1/pipelines/ranker/reconciliation?month=2026-11").json()
    assert said in page["warnings"][0]


def test_the_reconciliation_reads_the_totals_kept_at_import(
    client: TestClient, db: Database, ingest_headers: dict[str, str], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    run = make_run(run_id="held", started_at="2026-11-02T08:00:00+00:00",
                   finished_at="2026-11-02T18:00:00+00:00", interruptions=[],
                   data_stall_hours=0.0, checkpoint_hours=0.0, scheduling_wait_hours=0.0,
                   tags={"cloud_resource_id": aws_instance("i-0a1")})  # fmt: skip
    assert client.post("/api/v1/runs", json=run, headers=ingest_headers).status_code == 201
    assert import_files(db, [write_bill(tmp_path / "h.csv", _hourly())]) == 0
    with db.read() as s:
        assert s.scalar(select(func.count()).select_from(BillTotal)) == 2  # ranker, unclaimed

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("read the lines although the totals were kept")

    monkeypatch.setattr(service.repository, "lines_between", refuse)
    monkeypatch.setattr(service.repository, "holdings_between", refuse)
    answer = client.get("/api/v1/reconciliation?month=2026-11").json()
    # 24 lines of $30; the run held i-0a1 08:00-18:00: 10 of them explained, $300.
    assert answer["pipelines"][0]["billed_usd"] == pytest.approx(720.0)
    assert answer["pipelines"][0]["explained_usd"] == pytest.approx(300.0)
    assert 'data-total="bill"' in client.get("/").text
    monkeypatch.undo()
    # A run of the month stored after the import: the totals no longer hold, so the
    # reconciliation reads the lines again (and the new run explains its hours).
    later = {**run, "run_id": "later", "started_at": "2026-11-02T18:00:00+00:00",
             "finished_at": "2026-11-02T20:00:00+00:00"}  # fmt: skip
    assert client.post("/api/v1/runs", json=later, headers=ingest_headers).status_code == 201
    answer = client.get("/api/v1/reconciliation?month=2026-11").json()
    assert answer["pipelines"][0]["explained_usd"] == pytest.approx(360.0)  # 12 h x $30
    # Reconciled from the lines once: kept while the runs and the bill stay as they are.
    monkeypatch.setattr(service.repository, "lines_between", refuse)
    again = client.get("/api/v1/reconciliation?month=2026-11").json()
    assert again["pipelines"][0]["explained_usd"] == pytest.approx(360.0)


def test_two_imports_at_once_count_what_was_stored(
    committed_db: Database, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [r for i in range(20) for r in _hourly(f"i-{i:03d}")]  # 480 lines
    paths = [write_bill(tmp_path / f"same-{n}.csv", rows) for n in range(2)]
    try:
        threads = [threading.Thread(target=import_files, args=(committed_db, [p]))
                   for p in paths]  # fmt: skip
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        out = capsys.readouterr().out
        news = [int(s.split(" new")[0].rsplit(" ", 1)[-1]) for s in out.splitlines()
                if " new, " in s]  # fmt: skip
        assert sorted(news) == [0, 480]
        assert _count(committed_db)[0] == 480
    finally:
        with committed_db.write() as s:
            s.execute(delete(BillLine))
            s.execute(delete(BillTotal))


def test_a_large_csv_is_read_in_bounded_memory(tmp_path: Path) -> None:
    # 10,000 lines (~7 MB) read through: the reader holds a row at a time, so its peak
    # stays far below the file (the lines of a whole file held would be ~30 MB).
    rows = _hourly()
    path = tmp_path / "large.csv"
    write_bill(path, (dict(r, ResourceId=aws_instance(f"i-{n % 40}")) for n in range(417)
                      for r in rows))  # fmt: skip
    bill = BillFile(path)
    tracemalloc.start()
    try:
        count = sum(1 for _ in bill.lines())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert count == bill.gpu_lines == 417 * 24
    assert peak < 8 * 2**20, f"peak {peak / 2**20:.1f} MB"
