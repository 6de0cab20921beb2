"""A run tagged with the full ARN joins a bill line naming the bare instance id (through
the database: the page's read of the lines and the reconciliation); the import names
the GPU-family instance types the SKU table does not know, and counts part of one GPU as
its fraction."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from app.billing.command import import_files
from app.db.engine import Database
from app.db.models import BillLine
from tests.fixtures.bills import aws_instance, aws_row, write_bill
from tests.fixtures.builders import make_run

DAY = ("2026-11-02T00:00:00.000Z", "2026-11-03T00:00:00.000Z")


def test_the_arn_tagged_run_joins_the_bare_id_bill(
    client: TestClient,
    db: Database,
    ingest_headers: dict[str, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    bare = aws_row("i-0e5", *DAY, hours=24, list_cost=686.54)
    bare["ResourceId"] = "i-0e5"  # the bill names the bare instance id
    fractional = aws_row("i-0f6", *DAY, hours=24, list_cost=10.0, instance_type="g6f.xlarge")
    path = write_bill(tmp_path / "bare-ids.csv", [bare, fractional])
    run = make_run(
        pipeline="ranker",
        run_id="r-arn",
        started_at="2026-11-02T00:00:00+00:00",
        finished_at="2026-11-02T12:00:00+00:00",
        tags={"cloud_resource_id": aws_instance("i-0e5")},  # the full ARN, as advised
    )
    answer = client.post("/api/v1/runs/batch", json={"runs": [run]}, headers=ingest_headers)
    assert answer.status_code == 201, answer.text
    assert import_files(db, [path]) == 0
    err = capsys.readouterr().err
    assert "g6f.xlarge" not in err and "p4d.24xlarge" not in err  # both in the catalog
    with db.read() as session:
        line = session.scalars(select(BillLine).where(BillLine.gpus_per_unit < 1)).one()
    # An eighth of an L4 for 24 hours: 24 x 1/8 = 3 GPU-hours.
    assert (line.gpus_per_unit, line.gpu_hours) == (0.125, pytest.approx(3.0))
    ranker = client.get("/api/v1/pipelines/ranker/reconciliation?month=2026-11").json()
    # 24 h line of $686.54, held 12 h by the ARN-tagged run: 686.54 x 12/24 = 343.27.
    assert ranker["billed_usd"] == pytest.approx(686.54)
    assert ranker["explained_usd"] == pytest.approx(343.27)
