"""The forecast's own record (``GET /api/v1/pipelines/{name}/forecast-record``): closed
months scored against their bills, backtested from the runs that had started before each
month, stored forecasts never rewritten."""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import date, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine, event
from sqlalchemy.exc import IntegrityError

from app.alerts import sweeper
from app.analytics import costs, month, record
from app.db import forecasts
from app.db.engine import Database
from app.db.models import ForecastRecord
from app.pipelines.service import briefs, get_by_name
from app.planning.backtest import month_start
from app.planning.scenario import RUN_WINDOW
from tests.fixtures.forecast_record import (
    CURRENT,
    FIRST,
    NAME,
    NOW,
    PRICE,
    at,
    post,
    weekly_runs,
)


@pytest.fixture
def seeded(
    client: TestClient, admin_headers: dict[str, str], ingest_headers: dict[str, str]
) -> TestClient:
    body = {"runs_per_week": 1, "monthly_budget_usd": 900.0, "price_per_gpu_hour": PRICE}
    assert client.put(f"/api/v1/pipelines/{NAME}", json=body, headers=admin_headers).is_success
    post(client, ingest_headers, weekly_runs(FIRST, CURRENT))
    return client


def spend_by_month(runs: list[dict[str, Any]]) -> dict[str, float]:
    out: dict[str, float] = {}
    for r in runs:
        start = datetime.fromisoformat(r["started_at"])
        hours = (datetime.fromisoformat(r["finished_at"]) - start).total_seconds() / 3600
        key = start.strftime("%Y-%m")
        out[key] = out.get(key, 0.0) + 8 * hours * PRICE
    return out


def test_each_closed_month_is_backtested_and_scored(seeded: TestClient, db: Database) -> None:
    r = seeded.get(f"/api/v1/pipelines/{NAME}/forecast-record", params={"months": 12})
    assert r.status_code == 200, r.text
    body = r.json()
    months = body["months"]
    expected = [m.strftime("%Y-%m") for m in record.closed_months(CURRENT, 12)]
    assert [m["month"] for m in months] == expected  # newest first, every month forecast
    assert {m["source"] for m in months} == {"backtest"}
    assert body["notes"] == [record.BACKTEST_NOTE]
    with db.read() as s:  # reads never write: nothing stored
        assert forecasts.stored(s, None, FIRST, CURRENT) == {}
    spend = spend_by_month(weekly_runs(FIRST, CURRENT))
    for m in months:
        assert m["actual_usd"] == pytest.approx(spend[m["month"]])
        assert m["p90_exceeded"] == (m["actual_usd"] > m["bill_p90_usd"])
        assert m["inside_band"] == (m["bill_p10_usd"] <= m["actual_usd"] <= m["bill_p90_usd"])
        assert m["forecast_at"].startswith(m["month"] + "-01T00:00:00")
        assert m["budget_usd"] == 900.0 and m["status"] is not None
    s = body["summary"]
    assert s["months"] == 12
    assert s["p90_exceeded"] == sum(m["p90_exceeded"] for m in months)
    assert s["inside_band"] == sum(m["inside_band"] for m in months)
    errors = [abs(m["error_pct"]) for m in months]
    assert s["mean_abs_error_pct"] == pytest.approx(sum(errors) / 12)
    assert s["sentence"].startswith(f"The p90 was exceeded in {s['p90_exceeded']} of the last 12")
    # 36 months back reaches before the first runs: those months have nothing to score.
    longest = seeded.get(f"/api/v1/pipelines/{NAME}/forecast-record?months=36").json()
    assert longest["summary"]["months"] == 13  # FIRST's month has no earlier run


def test_a_later_run_leaves_earlier_forecasts_as_they_were(
    seeded: TestClient, ingest_headers: dict[str, str]
) -> None:
    url = f"/api/v1/pipelines/{NAME}/forecast-record?months=12"
    before = {m["month"]: m for m in seeded.get(url).json()["months"]}
    later = record.closed_months(CURRENT, 3)[-1]  # three months ago
    costly = at(month_start(later) + timedelta(days=9, hours=3), 60, run_id="costly")
    post(seeded, ingest_headers, [costly])
    after = {m["month"]: m for m in seeded.get(url).json()["months"]}
    key = later.strftime("%Y-%m")
    assert after[key]["actual_usd"] == pytest.approx(before[key]["actual_usd"] + 8 * 60 * PRICE)
    forecast = ("expected_bill_usd", "bill_p10_usd", "bill_p90_usd", "p_over_budget", "status")
    for m, old in before.items():
        if m <= key:  # forecast at or before the run's month's start: the run is unseen
            assert {f: after[m][f] for f in forecast} == {f: old[f] for f in forecast}, m
        else:  # made after it started: the window holds it
            assert after[m]["expected_bill_usd"] > old["expected_bill_usd"], m


def test_the_backtest_is_the_forecast_the_app_makes_at_the_months_start(
    client: TestClient, db: Database, admin_headers: dict[str, str], ingest_headers: dict[str, str]
) -> None:
    """For a pipeline whose runs all started before month M, the backtest of M equals the
    app's own month to date at M's first instant (``month.months``: the window read by
    SQL, the failed attempts added there)."""
    newest = record.closed_months(CURRENT, 1)[0]
    body = {"runs_per_week": 1, "monthly_budget_usd": 900.0, "price_per_gpu_hour": PRICE}
    assert client.put("/api/v1/pipelines/rec2", json=body, headers=admin_headers).is_success
    post(client, ingest_headers, weekly_runs(FIRST, newest, pipeline="rec2"))
    with db.read() as s:
        pipeline = get_by_name(s, "rec2")
        runs = forecasts.record_runs(s, pipeline.id, month_start(FIRST), month_start(CURRENT))
        listed = [b for b in briefs(s) if b.name == "rec2"]
        live = month.months(s, listed, month_start(newest))[pipeline.id]
        thresholds = month.status_thresholds_of(s)
        backtest = month.forecast_of_month(pipeline, runs, newest, thresholds)
        window = costs.windows(s, listed, RUN_WINDOW)[pipeline.id]
    assert backtest is not None
    assert len(window) == RUN_WINDOW
    assert max(c for c, _, _ in window) > 8 * 14 * PRICE  # a failed attempt is in its retraining
    assert backtest.expected_end_of_month_usd == pytest.approx(live.expected_end_of_month_usd)
    assert backtest.end_of_month_p10_usd == pytest.approx(live.end_of_month_p10_usd)
    assert backtest.end_of_month_p90_usd == pytest.approx(live.end_of_month_p90_usd)
    assert backtest.p_over_budget == live.p_over_budget
    assert backtest.status == live.status
    assert backtest.remaining_runs == live.remaining_runs >= 4


def test_a_stored_forecast_is_used_and_never_rewritten(seeded: TestClient, db: Database) -> None:
    closed = record.closed_months(CURRENT, 2)[-1]  # two months ago: its run days are known
    then = month_start(closed) + timedelta(hours=1)
    assert record.record_months(db, now=then) == 1
    assert record.record_months(db, now=then + timedelta(days=3)) == 0  # one per month
    with db.read() as s:
        pid = get_by_name(s, NAME).id
        first = forecasts.stored(s, [pid], closed, CURRENT)[pid][closed]
    assert first.source == "recorded" and first.forecast_at == then
    rewrite = replace(first, expected_bill_usd=first.expected_bill_usd + 500)
    with db.write() as s:
        assert forecasts.insert_if_absent(s, pid, rewrite) is False
    with pytest.raises(IntegrityError), db.write() as s:
        s.add(ForecastRecord(pipeline_id=pid, **rewrite.__dict__))
        s.flush()
    with db.read() as s:
        assert forecasts.stored(s, [pid], closed, CURRENT)[pid][closed] == first
    body = seeded.get(f"/api/v1/pipelines/{NAME}/forecast-record?months=3").json()
    shown = {m["month"]: m for m in body["months"]}[closed.strftime("%Y-%m")]
    assert shown["source"] == "recorded"
    assert shown["expected_bill_usd"] == pytest.approx(first.expected_bill_usd)
    assert shown["forecast_at"].startswith(then.strftime("%Y-%m-%dT%H:%M"))


def test_the_sweeper_thread_records_and_outlives_an_error(
    seeded: TestClient, db: Database, monkeypatch: pytest.MonkeyPatch, caplog: Any
) -> None:
    assert sweeper.record(db) == 1  # this month's forecast, as of now
    with db.read() as s:
        pid = get_by_name(s, NAME).id
        kept = forecasts.stored(s, [pid], CURRENT, date(2100, 1, 1))
    assert kept[pid][CURRENT].source == "recorded"

    def away(_db: Database) -> int:
        raise RuntimeError("database away\nsecond line")

    monkeypatch.setattr(sweeper, "record_months", away)
    assert sweeper.record(db) == 0
    assert "forecast record could not store this month's forecasts: database away" in caplog.text


def test_the_sweeper_step_is_bounded(
    seeded: TestClient, db: Database, admin_headers: dict[str, str]
) -> None:
    body = {"runs_per_week": 1}
    assert seeded.put("/api/v1/pipelines/empty", json=body, headers=admin_headers).is_success
    with db.read() as s:
        assert [n for _, n in forecasts.unrecorded(s, CURRENT, 10)] == [NAME]  # no runs: none
    # In a month's last ten minutes nothing is stored: a row for a month must be in
    # before the month closes, so a kept record of closed months is never missing one.
    last_minutes = month_start(CURRENT) - timedelta(minutes=5)
    assert record.record_months(db, now=last_minutes) == 0
    with db.read() as s:
        assert forecasts.stored(s, None, record.closed_months(CURRENT, 1)[0], CURRENT) == {}
    assert record.record_months(db, now=NOW, limit=1) == 1
    assert record.record_months(db, now=NOW, limit=1) == 0


@pytest.mark.parametrize("months", ["0", "37", "-1", "twelve"])
def test_months_out_of_range_is_a_422_naming_it(seeded: TestClient, months: str) -> None:
    r = seeded.get(f"/api/v1/pipelines/{NAME}/forecast-record", params={"months": months})
    assert r.status_code == 422
    assert r.json()["error"]["fields"][0]["field"] == "months"


def test_an_unknown_pipeline_is_a_404(client: TestClient) -> None:
    assert client.get("/api/v1/pipelines/nobody/forecast-record").status_code == 404


def test_a_record_reads_the_runs_once_and_keeps_the_backtests(
    client: TestClient,
    engine: Engine,
    admin_headers: dict[str, str],
    ingest_headers: dict[str, str],
) -> None:
    """24 months of a pipeline with hundreds of runs: one read of the runs, not one per
    month; a second request reads no run (kept under the change count and settings)."""
    body = {"runs_per_week": 3, "monthly_budget_usd": 2700.0, "price_per_gpu_hour": PRICE}
    assert client.put(f"/api/v1/pipelines/{NAME}", json=body, headers=admin_headers).is_success
    first = record.closed_months(CURRENT, 26)[-1]
    runs = weekly_runs(first, CURRENT)
    for day in (2, 4):  # three retrainings a week: hundreds of runs
        runs += [moved(r, day) for r in weekly_runs(first, CURRENT)]
    post(client, ingest_headers, runs)
    seen: list[str] = []

    def count(_c: Any, _cur: Any, statement: str, *_a: Any) -> None:
        seen.append(" ".join(statement.split()))

    url = f"/api/v1/pipelines/{NAME}/forecast-record?months=24"
    event.listen(engine, "before_cursor_execute", count)
    try:
        started = time.perf_counter()
        r = client.get(url)
        cold_ms = (time.perf_counter() - started) * 1000
        cold = [s for s in seen if "FROM run JOIN pipeline" in s]
        seen.clear()
        assert client.get(url).json() == r.json()
        warm = [s for s in seen if "FROM run JOIN pipeline" in s]
    finally:
        event.remove(engine, "before_cursor_execute", count)
    assert r.status_code == 200 and r.json()["summary"]["months"] == 24
    assert len(runs) > 300 and len(cold) == 1 and warm == []
    print(f"cold record of 24 months, {len(runs)} runs: {cold_ms:.0f} ms")


def moved(run: dict[str, Any], days: int) -> dict[str, Any]:
    """The same attempt ``days`` later, under its own ids."""
    later = {k: (datetime.fromisoformat(run[k]) + timedelta(days=days)).isoformat()
             for k in ("started_at", "finished_at")}  # fmt: skip
    ids = {"run_id": f"{run['run_id']}-{days}", "retraining_id": f"{run['retraining_id']}-{days}"}
    return {**run, **later, **ids}


def test_a_process_keeps_the_most_recently_used_records_only(
    seeded: TestClient,
    db: Database,
    admin_headers: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert seeded.put("/api/v1/pipelines/other", json={}, headers=admin_headers).is_success
    slots = db.kept.slots("forecast_record")
    monkeypatch.setattr(slots, "declared", replace(slots.declared, bound=1))
    with db.read() as s:
        ours, other = get_by_name(s, NAME), get_by_name(s, "other")
        record.pipeline_record(s, ours)
        assert {pid for pid, _ in slots.values} == {ours.id}
        record.pipeline_record(s, other)
        assert {pid for pid, _ in slots.values} == {other.id}  # ours dropped, not stale
        assert record.pipeline_record(s, ours).last(12)  # read again when asked
