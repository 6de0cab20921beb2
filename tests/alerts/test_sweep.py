"""No alert lost: an acknowledged run is judged by the alert rules even when the
evaluation that follows its response never happens (the process died) or fails (the
database errored). The sweeper finds such rules by the run change count they last judged.

``test_a_kill_between_acknowledgement_and_evaluation_loses_no_alert`` does it for real on
PostgreSQL: a `cadence serve` process acknowledges a run whose evaluation waits on a rule
lock held by the test, is killed with SIGKILL, and the next process delivers the webhook.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.engine import make_url

from app.alerts import admin, service
from app.alerts.sweeper import sweep
from app.db.base import utcnow
from app.db.engine import Database
from app.db.models import AlertDelivery, AlertRule
from app.pipelines.service import get_by_name
from tests.conftest import BACKEND, postgres_url
from tests.fixtures.alerts import Receiver, add_rule, drain, setup_pipeline
from tests.fixtures.builders import make_run
from tests.fixtures.serving import Served


def rules(db: Database) -> list[AlertRule]:
    with db.read_latest() as s:
        return list(s.scalars(select(AlertRule).order_by(AlertRule.id)))


def delivery_events(db: Database) -> list[str]:
    with db.read_latest() as s:
        return list(s.scalars(select(AlertDelivery.event).order_by(AlertDelivery.id)))


def failing_once(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The next evaluation's metrics read raises, as a database error would."""
    calls: list[int] = []
    real = service.read_metrics

    def flaky(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("the database went away mid-evaluation")
        return real(*args, **kwargs)

    monkeypatch.setattr(service, "read_metrics", flaky)
    return calls


def test_a_failed_evaluation_is_done_again_by_the_sweep(
    app_client: TestClient,
    admin_headers: dict[str, str],
    ingest_headers: dict[str, str],
    receiver: Receiver,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    c, db = app_client, app_client.app.state.database  # type: ignore[attr-defined]
    settings = c.app.state.settings  # type: ignore[attr-defined]
    setup_pipeline(c, admin_headers, budget=None)
    add_rule(c, admin_headers, kind="utilization_floor", threshold=0.4, webhook_url=receiver.url)
    calls = failing_once(monkeypatch)
    low = make_run(run_id="low", gpu_utilization=0.3)
    assert c.post("/api/v1/runs", json=low, headers=ingest_headers).status_code == 201
    # The follow-up ran and failed: the rule did not judge the run, nothing is queued.
    assert len(calls) == 1
    [rule] = rules(db)
    assert not rule.firing and rule.evaluated_changes is None and delivery_events(db) == []
    assert sweep(db, settings) == {"ranker": 1}
    [rule] = rules(db)
    assert rule.firing and rule.evaluated_changes is not None
    drain(c)
    assert [h["event"] for h in receiver.requests] == ["firing"]
    assert "GPU utilization 30.0% (floor 40.0%)" in receiver.requests[0]["text"]
    # Judged now: a second sweep evaluates nothing (no metrics read at all).
    assert sweep(db, settings) == {} and len(calls) == 2


def test_the_sweep_judges_only_what_moved_and_rules_gone_stale(
    app_client: TestClient,
    admin_headers: dict[str, str],
    ingest_headers: dict[str, str],
    receiver: Receiver,
) -> None:
    c, db = app_client, app_client.app.state.database  # type: ignore[attr-defined]
    settings = c.app.state.settings  # type: ignore[attr-defined]
    setup_pipeline(c, admin_headers, budget=None)
    add_rule(c, admin_headers, kind="utilization_floor", threshold=0.4, webhook_url=receiver.url)
    # A rule on a pipeline with no runs has nothing to judge.
    assert sweep(db, settings) == {}
    r = c.post("/api/v1/runs", json=make_run(), headers=ingest_headers)
    assert r.status_code == 201, r.text
    judged = rules(db)[0].evaluated_changes
    assert judged is not None  # the follow-up judged it (38% is above the floor)
    assert sweep(db, settings) == {}
    # Deleting a run moves the change count too.
    r = c.delete(f"/api/v1/runs/{r.json()['id']}", headers=admin_headers)
    assert r.status_code == 204, r.text
    with db.write() as s:  # as if the follow-up of the delete had been lost
        s.get(AlertRule, rules(db)[0].id).evaluated_changes = judged  # type: ignore[union-attr]
    assert sweep(db, settings) == {"ranker": 0}
    assert rules(db)[0].evaluated_changes != judged
    # Nothing moved, but the last evaluation is older than alert_reevaluate_seconds.
    later = utcnow() + timedelta(seconds=settings.alert_reevaluate_seconds + 1)
    assert sweep(db, settings, now=later) == {"ranker": 0}
    assert rules(db)[0].last_evaluated_at == later


# --- a real process, killed between the 201 and the evaluation ---------------------------

PG_ONLY = pytest.mark.skipif(
    BACKEND != "postgresql",
    reason="a real kill under a row lock: in the PostgreSQL pass",
)


@pytest.fixture
def scratch_database() -> Iterator[str]:
    """A database of its own on the test server, dropped afterwards."""
    url = make_url(postgres_url())
    name = f"cadence_crash_{uuid.uuid4().hex[:8]}"
    admin_dsn = f"host={url.host} port={url.port or 5432} user={url.username} dbname={url.database}"
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield url.set(database=name).render_as_string(hide_password=False)
    finally:
        with psycopg.connect(admin_dsn, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def wait_until(predicate: Any, what: str, seconds: float = 30) -> None:
    pause = threading.Event()
    for _ in range(int(seconds * 10)):
        if predicate():
            return
        pause.wait(0.1)
    raise AssertionError(f"timed out waiting for {what}")


@PG_ONLY
def test_a_kill_between_acknowledgement_and_evaluation_loses_no_alert(
    scratch_database: str, receiver: Receiver, tmp_path: Path
) -> None:
    served = Served(
        scratch_database,
        tmp_path / "cadence.log",
        CADENCE_WEBHOOK_ALLOWED_HOSTS="127.0.0.1",
        CADENCE_ALERT_MIN_INTERVAL_SECONDS="0",
        CADENCE_ALERT_SWEEP_SECONDS="0.5",
    )
    served.cadence("migrate")
    tokens = {s: served.create_token(s, s) for s in ("admin", "ingest")}
    admin = {"Authorization": f"Bearer {tokens['admin']}"}
    ingest = {"Authorization": f"Bearer {tokens['ingest']}"}
    dsn = make_url(scratch_database).set(drivername="postgresql").render_as_string(False)
    served.start()
    try:
        with httpx.Client(base_url=served.base_url, timeout=10) as http:
            settings = {"price_per_gpu_hour": 2.5, "runs_per_week": 1}
            assert http.put("/api/v1/pipelines/ranker", json=settings, headers=admin).is_success
            rule = {"kind": "utilization_floor", "threshold": 0.4, "webhook_url": receiver.url}
            r = http.post("/api/v1/pipelines/ranker/alerts", json=rule, headers=admin)
            assert r.status_code == 201, r.text
            with psycopg.connect(dsn) as lock, psycopg.connect(dsn, autocommit=True) as probe:
                lock.execute("SELECT id FROM alert_rule FOR UPDATE")  # the evaluation waits
                low = make_run(run_id="low", gpu_utilization=0.3)
                assert http.post("/api/v1/runs", json=low, headers=ingest).status_code == 201

                def evaluation_waits() -> bool:
                    q = "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                    row = probe.execute(q + " AND datname = current_database()").fetchone()
                    return bool(row and row[0] > 0)

                wait_until(evaluation_waits, "the evaluation to wait on the rule lock")
                served.kill()  # acknowledged, never evaluated
                lock.rollback()
                firing, queued = probe.execute(
                    "SELECT bool_or(firing), (SELECT count(*) FROM alert_delivery) FROM alert_rule"
                ).fetchone() or (None, None)
                assert firing is False and queued == 0
        served.start()  # the next process finds the unjudged run at start-up
        wait_until(lambda: len(receiver.requests) == 1, "the webhook after the restart")
        [hook] = receiver.requests
        assert hook["event"] == "firing" and "GPU utilization 30.0%" in hook["text"]
    finally:
        served.stop()


# --- the weekly digest ---------------------------------------------------------------------


def test_the_weekly_digest_goes_once_a_week_with_the_reviews_line(
    app_client: TestClient,
    admin_headers: dict[str, str],
    ingest_headers: dict[str, str],
    receiver: Receiver,
) -> None:
    from tests.fixtures.builders import demo_monday, last_week_day

    c, db = app_client, app_client.app.state.database  # type: ignore[attr-defined]
    settings = c.app.state.settings  # type: ignore[attr-defined]
    setup_pipeline(c, admin_headers, budget=None)
    for day in (0, 2):  # two runs of the worked example in the last complete week
        run = make_run(run_id=f"w{day}", **last_week_day(day))
        assert c.post("/api/v1/runs", json=run, headers=ingest_headers).status_code == 201
    refused = c.post(
        "/api/v1/pipelines/ranker/alerts",
        json={"kind": "weekly_digest", "threshold": 5, "webhook_url": receiver.url},
        headers=admin_headers,
    )
    assert refused.status_code == 422 and "must be 0" in refused.text
    add_rule(c, admin_headers, kind="weekly_digest", threshold=0, webhook_url=receiver.url)
    # Created now: the week that just ended counts as sent; the first goes next Monday.
    assert sweep(db, settings) == {"ranker": 0}
    monday = demo_monday() + timedelta(weeks=1)  # the Monday the next week ends
    next_monday = utcnow().replace(
        year=monday.year, month=monday.month, day=monday.day, hour=6
    ) + timedelta(weeks=1)
    assert sweep(db, settings, now=next_monday) == {"ranker": 1}
    # Evaluated again the same week (hourly, or another process): nothing more.
    later = next_monday + timedelta(seconds=settings.alert_reevaluate_seconds + 1)
    assert sweep(db, settings, now=later) == {"ranker": 0}
    drain(c, now=later)
    [hook] = receiver.requests
    assert hook["event"] == "digest" and hook["kind"] == "weekly_digest"
    # That Monday's last complete week is the one after the runs' week: no runs, $0.
    assert hook["summary"].startswith("0 runs cost $0 (−$")
    assert hook["url"] == f"/review?week={hook['week']}"
    assert delivery_events(db) == ["digest"]
    [rule] = rules(db)
    assert not rule.firing  # a digest has no state
    # A test send shows this week's digest at once: the runs' week, in the review's words
    # (2 runs of 112 GPU-h at $2.50 = $560), with what to fix first.
    # With CADENCE_PUBLIC_URL the link is absolute (a chat tool cannot open "/review").
    settings.public_url = "https://cadence.example.com/"
    try:
        with db.write() as s:
            pipeline = get_by_name(s, "ranker")
            admin.send_test(s, pipeline, rule.id, "alice")
        drain(c)
    finally:
        settings.public_url = ""
    test = receiver.requests[-1]
    assert test["event"] == "test" and test["summary"].startswith("2 runs cost $560;")
    assert test["url"] == f"https://cadence.example.com/review?week={test['week']}"
    assert test["actions"] and "halving it saves" in test["text"]
    # Each action says its label once: "Data-loading stall: Pre-shard ...", not the label
    # again in other words ("Data-loading stall: Input stalls: pre-shard ...").
    for action in test["actions"]:
        assert f"{action['label']}: {action['remedy']}" in test["text"]
        assert ":" not in action["remedy"].split(" ")[0], action
