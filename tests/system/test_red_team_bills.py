"""The red team's reproductions of issue 36 items 2, 3, 4, 8, 9 and 10, replayed: each is
refused or handled now. (Items 1, 5, 6 and 7 of the other importers are replayed by
their own tests; the FOCUS parts of 5 and 7 are here.)"""

from __future__ import annotations

import os
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
from cadence_client import Spool
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from app.analytics.prior import KEPT_PRIOR
from app.billing import service
from app.billing.command import import_files
from app.db.engine import Database
from app.db.models import BillLine
from app.main import create_app
from app.planning.cost_series import FIXED_PRIOR
from app.reporting.focus import FOCUS_1_0
from app.settings import Settings
from tests.fixtures.bills import AWS_COLUMNS, aws_instance, aws_row, write_bill
from tests.fixtures.builders import make_run, make_token
from tests.fixtures.security import sign_in

DAY = ("2026-11-02T00:00:00Z", "2026-11-03T00:00:00Z")


def _stored(db: Database) -> tuple[int, float]:
    with db.read() as s:
        count = s.scalar(select(func.count()).select_from(BillLine)) or 0
        return int(count), float(s.scalar(select(func.sum(BillLine.effective_cost))) or 0.0)


def test_item_2_a_bill_that_cannot_be(tmp_path: Path, db: Database) -> None:
    good = aws_row("i-0a1", *DAY, hours=24, list_cost=2377.0)
    hostile = [("BilledCost", "1e308"), ("BilledCost", "-1e300"),
               ("ConsumedQuantity", "1e308"), ("EffectiveCost", "Infinity")]  # fmt: skip
    for column, value in hostile:
        path = write_bill(tmp_path / f"{column}.csv", [{**good, column: value}])
        assert import_files(db, [path]) == 1, (column, value)
    twice = tmp_path / "twice.csv"
    header = [*AWS_COLUMNS, "BilledCost"]
    twice.write_text(",".join(header) + "\n" + ",".join(str(good.get(c, "")) for c in header[:-1])
                     + ",999\n")  # fmt: skip
    assert import_files(db, [twice]) == 1
    assert _stored(db) == (0, 0.0)
    # The same month as FOCUS 1.0 and 1.2, then as hourly rows: $2,377, not $4,754.
    as_10 = write_bill(tmp_path / "1.0.csv", [good], FOCUS_1_0)
    as_12 = write_bill(tmp_path / "1.2.csv", [good])
    hourly = write_bill(tmp_path / "hourly.csv", [
        aws_row("i-0a1", f"2026-11-02T{h:02d}:00:00Z",
                "2026-11-03T00:00:00Z" if h == 23 else f"2026-11-02T{h + 1:02d}:00:00Z",
                hours=1, list_cost=2377.0 / 24) for h in range(24)])  # fmt: skip
    assert import_files(db, [as_10, as_12, hourly]) == 0
    count, cost = _stored(db)
    assert count == 24 and cost == pytest.approx(2377.0)


def test_item_3_the_overview_reads_the_kept_totals(
    client: TestClient, db: Database, ingest_headers: dict[str, str], tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    assert client.post("/api/v1/runs", json=make_run(), headers=ingest_headers).is_success
    lines = [aws_row(f"i-{n % 40}", *DAY, hours=24, list_cost=10.0) for n in range(40)]
    assert import_files(db, [write_bill(tmp_path / "bill.csv", lines)]) == 0

    def slow(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("the overview reconciled the bill's lines on a request")

    monkeypatch.setattr(service.repository, "lines_between", slow)
    assert "$400 of GPUs billed" in client.get("/").text  # 40 untagged lines of $10


def test_item_4_a_retry_after_enrichment_is_accepted(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    run = make_run(run_id="enriched")
    assert client.post("/api/v1/runs", json=run, headers=ingest_headers).status_code == 201
    patch = "/api/v1/pipelines/ranker/runs/enriched/measurements"
    assert client.patch(patch, json={"gpu_utilization": 0.9}, headers=ingest_headers).is_success
    assert client.post("/api/v1/runs", json=run, headers=ingest_headers).status_code == 200


def test_item_8_abuse_that_costs_nothing(db: Database, settings: Settings) -> None:
    token_mode = settings.model_copy(update={"read_access": "token"})
    with TestClient(create_app(token_mode, database=db), follow_redirects=False) as c:
        answers = [sign_in(c, f"cad_wrong{n}").status_code for n in range(12)]
        assert answers[:10] == [401] * 10 and answers[10:] == [429, 429]
        assert c.get("/metrics").status_code == 401  # no names or costs for anyone


def test_item_9_smaller(client: TestClient, admin_headers: dict[str, str], tmp_path: Path) -> None:
    clash = client.get("/api/v1/runs/batch")
    assert clash.status_code == 405 and clash.headers["allow"] == "POST"
    body = {**admin_headers, "Content-Type": "application/json"}
    assert client.put("/api/v1/pipelines/p", content=b"<xml/>", headers=body).status_code == 422
    spec = client.get("/openapi.json").json()
    operations = [op for path, item in spec["paths"].items() for op in item.values()
                  if path.startswith("/api/") and isinstance(op, dict)]  # fmt: skip
    assert all("403" in op["responses"] for op in operations)
    name = spec["paths"]["/api/v1/pipelines/{name}"]["get"]["parameters"][0]["schema"]
    assert name["pattern"].startswith("^[a-z0-9]")
    audit = "/api/v1/pipelines/ranker/runs/{run_id}/measurement-changes"
    assert "get" in spec["paths"][audit.replace("ranker", "{name}")]
    spool = Spool(tmp_path / "spool")
    spool.write([make_run()])
    assert os.stat(spool.directory).st_mode & 0o777 == 0o700
    (spool.directory / "0-planted.jsonl").symlink_to(tmp_path / "elsewhere.jsonl")
    assert [p.name for p in spool.files()] != [] and all(not p.is_symlink() for p in spool.files())


def test_item_10_kept_values(db: Database, engine: object) -> None:
    made = replace(FIXED_PRIOR, log_spread=9.0)  # what only the rolled-back write saw
    with pytest.raises(RuntimeError), db.write() as s:
        assert KEPT_PRIOR.get(s, ("org", "probe"), lambda: made) is made
        raise RuntimeError("rolled back")
    with db.read() as s:
        assert KEPT_PRIOR.last(s, "org") is None  # never served after the rollback


def test_item_2_a_warning_and_counts_of_what_was_stored(
    client: TestClient, db: Database, ingest_headers: dict[str, str], tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    start = datetime(2026, 11, 2, 8, tzinfo=UTC)
    run = make_run(run_id="small", workers=1, started_at=start.isoformat(),
                   finished_at=start.replace(hour=18).isoformat(), interruptions=[],
                   data_stall_hours=0.0, checkpoint_hours=0.0,
                   tags={"cloud_resource_id": aws_instance("i-0a1")})  # fmt: skip
    assert client.post("/api/v1/runs", json=run, headers=ingest_headers).status_code == 201
    bill = write_bill(tmp_path / "b.csv", [aws_row("i-0a1", *DAY, hours=24, list_cost=720.0)])
    assert import_files(db, [bill, bill]) == 0
    out = capsys.readouterr().out
    assert "1 new, 0 already stored" in out and "0 new, 1 already stored" in out
    assert "more than the 10 its runs recorded" in out
    assert make_token(db, "read")  # the database is still usable after both imports
