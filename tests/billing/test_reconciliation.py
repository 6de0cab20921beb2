"""``cadence import focus`` on AWS, Azure and Google Cloud bills, then the reconciliation
on the API, worked by hand.

November 2026. ranker's runs name i-0a1, i-0b2 (AWS) and vm-1 (Azure); search's run
names gpu-1 (Google Cloud). The lines:

| line | what | EffectiveCost | held | explained |
|---|---|---|---|---|
| AWS i-0a1, Nov 2, 24 h p4d (8 GPU) | list $960, 25% off | $720 | run-1 10 h | 720 x 10/24 = $300 |
| AWS i-0b2, Nov 2, 24 h p4d | reserved, list $960 | $480 | run-2 12 h | 480 x 12/24 = $240 |
| AWS i-0c3, Nov 9-16, 168 h p4d | reservation unused, tagged ranker | $3,360 | none | $0 |
| AWS i-0d4, Nov 3, 24 h p4d | untagged, no run names it | $960 | none | unattributed |
| AWS S3 | storage | $12 | - | not a GPU line: skipped |
| Azure vm-1, Nov 5, 24 h ND96asr_v4 (8 GPU) | | $600 | run-3 6 h | 600 x 6/24 = $150 |
| GCP gpu-1, Nov 6 00-10, 40 GPU-hours of A100 | | $120 | run-s1 5 h | 120 x 5/10 = $60 |

ranker: billed 720 + 480 + 3,360 + 600 = $5,160; explained 300 + 240 + 150 = $690;
unexplained $4,470; GPU-hours 192 + 192 + 1,344 + 192 = 1,920; 5,160 / 1,920 = $2.6875
per GPU-hour. search: billed $120, explained $60, 40 GPU-hours, $3.00 per GPU-hour.
Unattributed $960 (192 GPU-hours). Total 5,160 + 120 + 960 = $6,240, explained $750.
"""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import pyarrow
import pyarrow.compute
import pyarrow.parquet as pq
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from app.billing import service
from app.billing.command import import_files
from app.db.engine import Database
from app.db.models import BillLine
from tests.fixtures.bills import (
    AZURE_COLUMNS,
    GCP_COLUMNS,
    aws_instance,
    aws_other,
    aws_row,
    azure_row,
    gcp_row,
    write_bill,
)
from tests.fixtures.builders import make_run

NOV2 = ("2026-11-02T00:00:00.000Z", "2026-11-03T00:00:00.000Z")
GCP_VM = "//compute.googleapis.com/projects/ml/zones/us-central1-a/instances/gpu-1"


def bills(tmp_path: Path) -> list[Path]:
    aws = write_bill(tmp_path / "aws-focus-1.2.csv", [
        aws_row("i-0a1", *NOV2, hours=24, list_cost=960.0, effective=720.0),
        aws_row("i-0b2", *NOV2, hours=24, list_cost=960.0, effective=480.0, billed=0.0,
                commitment="arn:aws:ec2:us-east-1:111122223333:reserved-instances/ri-1",
                status="Used"),
        aws_row("i-0c3", "2026-11-09T00:00:00.000Z", "2026-11-16T00:00:00.000Z", hours=168,
                list_cost=6720.0, effective=3360.0, billed=0.0, status="Unused",
                commitment="arn:aws:ec2:us-east-1:111122223333:reserved-instances/ri-2",
                tags={"user:cadence_pipeline": "ranker"}),
        aws_row("i-0d4", "2026-11-03T00:00:00.000Z", "2026-11-04T00:00:00.000Z", hours=24,
                list_cost=960.0),
        aws_other(*NOV2, 12.0),
    ])  # fmt: skip
    azure = write_bill(
        tmp_path / "azure-focus-1.0.csv",
        [azure_row("vm-1", "2026-11-05T00:00:00Z", "2026-11-06T00:00:00Z", hours=24, cost=600)],
        AZURE_COLUMNS,
    )
    gcp = write_bill(
        tmp_path / "gcp-focus.csv",
        [
            gcp_row(
                "gpu-1",
                "2026-11-06 00:00:00 UTC",
                "2026-11-06 10:00:00 UTC",
                gpu_hours=40,
                cost=120.0,
            )
        ],
        GCP_COLUMNS,
    )
    return [aws, azure, gcp]


def runs() -> list[dict[str, object]]:
    def held(pipeline: str, run_id: str, resource: str, start: str, end: str) -> dict[str, object]:
        return make_run(
            pipeline=pipeline, run_id=run_id, started_at=start, finished_at=end,
            tags={"cloud_resource_id": resource}, interruptions=[], data_stall_hours=0.5,
            checkpoint_hours=0.0,
        )  # fmt: skip

    return [
        held("ranker", "run-1", aws_instance("i-0a1"), "2026-11-02T08:00:00+00:00",
             "2026-11-02T18:00:00+00:00"),
        held("ranker", "run-2", f"{aws_instance('i-0b2')}, {aws_instance('i-0zz')}",
             "2026-11-02T00:00:00+00:00", "2026-11-02T12:00:00+00:00"),
        # Named by the VM's name, the last segment of the bill's ARM path.
        held("ranker", "run-3", "vm-1", "2026-11-05T06:00:00+00:00", "2026-11-05T12:00:00+00:00"),
        held("search", "run-s1", GCP_VM, "2026-11-06T00:00:00+00:00", "2026-11-06T05:00:00+00:00"),
        # A run with no cloud tag explains nothing and breaks nothing.
        make_run(pipeline="ranker", run_id="run-4", tags={}),
    ]  # fmt: skip


@pytest.fixture
def billed(
    client: TestClient, db: Database, ingest_headers: dict[str, str], tmp_path: Path
) -> TestClient:
    answer = client.post("/api/v1/runs/batch", json={"runs": runs()}, headers=ingest_headers)
    assert answer.status_code == 201, answer.text
    assert import_files(db, bills(tmp_path)) == 0
    return client


def test_each_pipelines_month_worked_by_hand(billed: TestClient) -> None:
    ranker = billed.get("/api/v1/pipelines/ranker/reconciliation?month=2026-11").json()
    assert ranker["billed_usd"] == pytest.approx(5160.0)
    assert ranker["explained_usd"] == pytest.approx(690.0)
    assert ranker["unexplained_usd"] == pytest.approx(4470.0)
    assert ranker["billed_gpu_hours"] == pytest.approx(1920.0)
    assert ranker["effective_price_per_gpu_hour"] == pytest.approx(2.6875)
    assert ranker["recorded_price_per_gpu_hour"] == 2.5  # the setting, beside the bill's
    assert ranker["month"] == "2026-11" and ranker["lines"] == 4
    search = billed.get("/api/v1/pipelines/search/reconciliation?month=2026-11").json()
    assert (search["billed_usd"], search["explained_usd"]) == pytest.approx((120.0, 60.0))
    assert search["effective_price_per_gpu_hour"] == pytest.approx(3.0)
    # The default month is the newest billed one.
    assert billed.get("/api/v1/pipelines/search/reconciliation").json()["month"] == "2026-11"
    # Another month holds nothing.
    october = billed.get("/api/v1/pipelines/ranker/reconciliation?month=2026-10").json()
    assert october["billed_usd"] == 0.0 and october["effective_price_per_gpu_hour"] is None


def test_every_pipeline_the_unattributed_and_the_total(billed: TestClient) -> None:
    org = billed.get("/api/v1/reconciliation?month=2026-11").json()
    assert [p["pipeline"] for p in org["pipelines"]] == ["ranker", "search"]
    assert org["unattributed"]["billed_usd"] == pytest.approx(960.0)
    assert org["unattributed"]["billed_gpu_hours"] == pytest.approx(192.0)
    assert org["total"]["billed_usd"] == pytest.approx(6240.0)
    assert org["total"]["explained_usd"] == pytest.approx(750.0)
    answer = billed.get("/api/v1/reconciliation.csv?month=2026-11")
    assert answer.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(answer.text)))
    assert [r["pipeline"] for r in rows] == ["ranker", "search", "(unattributed)", "(total)"]
    assert float(rows[0]["unexplained_usd"]) == pytest.approx(4470.0)
    assert float(rows[3]["billed_usd"]) == pytest.approx(6240.0)


def test_the_same_bill_twice_stores_nothing_twice(
    billed: TestClient, db: Database, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with db.read() as session:
        before = session.scalar(select(func.count()).select_from(BillLine))
    assert before == 6  # 4 AWS GPU lines (S3 skipped), 1 Azure, 1 GCP
    assert import_files(db, bills(tmp_path)) == 0
    assert "0 new, 4 already stored" in capsys.readouterr().out
    with db.read() as session:
        assert session.scalar(select(func.count()).select_from(BillLine)) == before
    ranker = billed.get("/api/v1/pipelines/ranker/reconciliation?month=2026-11").json()
    assert ranker["billed_usd"] == pytest.approx(5160.0)


def test_bad_month_and_unknown_pipeline(billed: TestClient) -> None:
    answer = billed.get("/api/v1/pipelines/ranker/reconciliation?month=2026-13")
    assert answer.status_code == 422
    assert answer.json()["error"]["fields"][0]["field"] == "month"
    assert billed.get("/api/v1/pipelines/nobody/reconciliation").status_code == 404


def test_a_parquet_bill_reads_as_its_csv(db: Database, tmp_path: Path) -> None:
    rows = [azure_row("vm-9", "2026-11-05T00:00:00Z", "2026-11-06T00:00:00Z", hours=24, cost=600)]
    path = tmp_path / "azure.parquet"
    pq.write_table(pyarrow.Table.from_pylist(rows), path)
    assert import_files(db, [path]) == 0
    with db.read() as session:
        line = session.scalars(select(BillLine).where(BillLine.source == str(path))).one()
    # 24 h of an ND96asr_v4 (8 A100) = 192 GPU-hours for $600.
    assert (line.gpu_hours, line.effective_cost, line.provider) == (192.0, 600.0, "Microsoft")


def test_the_pipeline_page_and_the_overview_show_it(billed: TestClient) -> None:
    # The default month is November (the newest billed); the figures are the API's.
    page = billed.get("/pipelines/ranker").text
    assert 'data-bill="billed">$5,160' in page
    assert 'data-bill="explained">$690' in page and "(13%" in page  # 690 / 5,160 = 13.4%
    assert 'data-bill="unexplained">$4,470' in page
    assert 'data-bill="price">$2.69 on the bill' in page and "$2.50 in the settings" in page
    overview = billed.get("/").text
    # 6,240 billed, 750 explained (12%), 5,490 not, 960 on untagged instances.
    assert "$6,240 of GPUs billed, $750 explained by runs (12%), $5,490 not" in overview
    assert "of which $960 on instances no run names" in overview


def test_without_a_bill_the_overview_reads_no_held_resources(
    client: TestClient, ingest_headers: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """No bill imported: the overview shows no bill line and reads nothing for it (the
    runs' held resources of a month are the slow read at 10M runs)."""
    answer = client.post("/api/v1/runs/batch", json={"runs": runs()}, headers=ingest_headers)
    assert answer.status_code == 201, answer.text

    def refuse(*_args: object) -> None:
        raise AssertionError("the overview read the runs' held resources without a bill")

    monkeypatch.setattr(service.repository, "holdings_between", refuse)
    overview = client.get("/")
    assert overview.status_code == 200 and 'data-total="bill"' not in overview.text


def test_a_token_limited_to_one_pipeline_sees_only_its_figures(
    billed: TestClient, db: Database
) -> None:
    # What /api/v1/reconciliation answers a token limited to search (read_access=token;
    # the route passes visible_pipelines(viewer), as the portfolio does).
    with db.read() as session:
        org = service.org_reconciliation(session, "2026-11", ("search",))
    assert [p.pipeline for p in org.pipelines] == ["search"]
    # No org-wide figure: the total and the untagged lines would tell of other pipelines.
    assert org.total.billed_usd == 0.0 and org.unattributed.billed_usd == 0.0


def test_a_scenario_priced_from_the_bill(billed: TestClient) -> None:
    # ranker's bill price is $2.6875 (above); its runs recorded $2.50.
    plain = billed.get("/pipelines/ranker").text
    priced = billed.get("/pipelines/ranker?price_from=bill").text
    assert "price: from the bill, $2.69, as of 2026-11" in priced
    assert 'data-price-source="bill"' not in plain
    assert '<option value="bill" selected>the bill, $2.69 (2026-11)' in priced

    def first_cost(html: str) -> float:
        found = re.search(r'data-testid="monthly-cost">\$([\d,]+)<', html)
        assert found
        return float(found.group(1).replace(",", ""))

    # Every dollar scales with the price: 2.6875 / 2.5 = 1.075 times the recorded cost
    # (all of ranker's runs recorded $2.50), within the card's rounding to a dollar.
    assert first_cost(priced) == pytest.approx(first_cost(plain) * 1.075, abs=1.5)
    assert 'name="price" min="0" step="0.01" placeholder="2.5" value=""' in priced  # unset
    fragment = billed.get("/pipelines/ranker/whatif?price_from=bill").json()
    assert "price: from the bill, $2.69, as of 2026-11" in fragment["decision_html"]


def test_a_bill_in_csv_then_in_parquet_is_stored_once(db: Database, tmp_path: Path) -> None:
    rows = [azure_row("vm-7", "2026-11-05T00:00:00Z", "2026-11-06T00:00:00Z", hours=24, cost=600)]
    as_csv = write_bill(tmp_path / "azure.csv", rows, AZURE_COLUMNS)
    as_parquet = tmp_path / "azure.parquet"
    table = pyarrow.Table.from_pylist(rows)
    # The Parquet download types its columns: timestamps and numbers, not text.
    for name in ("ChargePeriodStart", "ChargePeriodEnd", "BillingPeriodStart", "BillingPeriodEnd"):
        column = pyarrow.compute.strptime(
            table[name], "%Y-%m-%dT%H:%M:%SZ", "s", error_is_null=False
        )
        table = table.set_column(table.column_names.index(name), name, column)
    pq.write_table(table, as_parquet)
    assert import_files(db, [as_csv, as_parquet]) == 0
    with db.read() as session:
        assert session.scalar(select(func.count()).select_from(BillLine)) == 1
