"""The bill's kept totals follow the runs (issue 36): a run of the month that names a
cloud resource, stored, completed or deleted after the import, marks the month moved,
so the reconciliation is right at once; other runs leave the kept totals read."""

from __future__ import annotations

from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.billing import service
from app.billing.command import import_files
from app.db.bill_marks import months_of
from app.db.engine import Database
from tests.fixtures.bills import aws_instance, aws_row, write_bill
from tests.fixtures.builders import make_run

MONTH = "/api/v1/reconciliation?month=2026-11"


def _hourly(instance: str) -> list[dict[str, object]]:
    """24 lines of $30 for Nov 2, one an hour."""
    return [
        aws_row(instance, f"2026-11-02T{h:02d}:00:00Z", f"2026-11-02T{h + 1:02d}:00:00Z"
                if h < 23 else "2026-11-03T00:00:00Z", hours=1, list_cost=30.0)
        for h in range(24)
    ]  # fmt: skip


def _run(run_id: str, instance: str | None, start: str, end: str, **more: Any) -> dict[str, Any]:
    tags = {} if instance is None else {"cloud_resource_id": aws_instance(instance)}
    return make_run(run_id=run_id, started_at=start, finished_at=end, interruptions=[],
                    data_stall_hours=0.0, checkpoint_hours=0.0, scheduling_wait_hours=0.0,
                    tags=tags, **more)  # fmt: skip


def _explained(client: TestClient) -> float:
    answer = client.get(MONTH).json()
    return float(sum(p["explained_usd"] for p in answer["pipelines"]))


@pytest.fixture
def billed(client: TestClient, db: Database, ingest_headers: dict[str, str], tmp_path: Path) -> int:
    """Run "held" on i-0a1 08:00-18:00 of Nov 2, then the bill of i-0a1 and i-0b2 for the
    day imported; the run's pk."""
    run = _run("held", "i-0a1", "2026-11-02T08:00:00+00:00", "2026-11-02T18:00:00+00:00")
    response = client.post("/api/v1/runs", json=run, headers=ingest_headers)
    assert response.status_code == 201
    rows = _hourly("i-0a1") + _hourly("i-0b2")
    assert import_files(db, [write_bill(tmp_path / "nov.csv", rows)]) == 0
    # 10 of i-0a1's hours held: $300 explained.
    assert _explained(client) == pytest.approx(300.0)
    return int(response.json()["id"])


def _refuse_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("read the lines although the kept totals hold")

    monkeypatch.setattr(service.repository, "lines_between", refuse)


def test_a_run_replaced_by_one_of_the_same_hours_elsewhere_moves_the_totals(
    client: TestClient, billed: int, ingest_headers: dict[str, str],
    admin_headers: dict[str, str],
) -> None:  # fmt: skip
    # The same count and GPU-hours in the same week (all the rollups' stamp read: 8
    # workers x 10 h = 20 x 4 h = 80) on another instance for 4 hours: the stamp came
    # back to the import's and kept $300.
    assert client.delete(f"/api/v1/runs/{billed}", headers=admin_headers).status_code == 204
    assert _explained(client) == pytest.approx(0.0)
    other = _run(
        "moved", "i-0b2", "2026-11-02T08:00:00+00:00", "2026-11-02T12:00:00+00:00", workers=20
    )
    assert client.post("/api/v1/runs", json=other, headers=ingest_headers).status_code == 201
    assert _explained(client) == pytest.approx(120.0)  # 4 h x $30 of i-0b2
    answer = client.get("/api/v1/pipelines/ranker/reconciliation?month=2026-11").json()
    assert answer["explained_usd"] == pytest.approx(120.0)


def test_a_run_completed_after_the_import_moves_the_totals(
    client: TestClient, billed: int, ingest_headers: dict[str, str]
) -> None:
    start = _run("late", "i-0b2", "2026-11-02T00:00:00+00:00", "2026-11-02T04:00:00+00:00")
    running = {**start, "outcome": "running"}
    for key in ("finished_at", "gpu_hours", "gpu_utilization"):
        running.pop(key, None)
    assert client.post("/api/v1/runs", json=running, headers=ingest_headers).status_code == 201
    assert _explained(client) == pytest.approx(300.0)  # a running attempt holds nothing yet
    assert client.post("/api/v1/runs", json=start, headers=ingest_headers).status_code == 200
    assert _explained(client) == pytest.approx(300.0 + 4 * 30.0)  # its 4 hours of i-0b2


def test_a_long_run_from_two_months_before_moves_the_totals(
    client: TestClient, billed: int, ingest_headers: dict[str, str]
) -> None:
    # Started Sep 25, finished Nov 2 01:00: it held i-0b2 for Nov 2's first hour.
    run = _run("long", "i-0b2", "2026-09-25T00:00:00+00:00", "2026-11-02T01:00:00+00:00")
    assert client.post("/api/v1/runs", json=run, headers=ingest_headers).status_code == 201
    assert _explained(client) == pytest.approx(330.0)


def test_runs_without_a_cloud_resource_leave_the_kept_totals_read(
    client: TestClient, billed: int, ingest_headers: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    plain = _run("plain", None, "2026-11-02T08:00:00+00:00", "2026-11-02T18:00:00+00:00")
    assert client.post("/api/v1/runs", json=plain, headers=ingest_headers).status_code == 201
    _refuse_lines(monkeypatch)
    assert _explained(client) == pytest.approx(300.0)
    # A run of another month marks only its own.
    december = _run("dec", "i-0a1", "2026-12-02T08:00:00+00:00", "2026-12-02T18:00:00+00:00")
    assert client.post("/api/v1/runs", json=december, headers=ingest_headers).status_code == 201
    assert _explained(client) == pytest.approx(300.0)


def test_months_of_spans() -> None:
    nov2 = datetime(2026, 11, 2, tzinfo=UTC)
    # Within a month: that month; ending on the next month's first instant: not that one.
    assert months_of([(nov2, datetime(2026, 12, 1, tzinfo=UTC))]) == [date(2026, 11, 1)]
    # Dec 31 to Feb 1 00:01, naive (SQLite's UTC): December, January and February.
    spans = [(datetime(2026, 12, 31), datetime(2027, 2, 1, 0, 1))]
    assert months_of(spans) == [date(2026, 12, 1), date(2027, 1, 1), date(2027, 2, 1)]
