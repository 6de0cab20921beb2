"""Alert webhooks, hardened: where they may go, what readers see, and the outbox that
sends them outside requests (retries, flapping, restarts, several senders)."""

from __future__ import annotations

import ipaddress
import secrets
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select, update

from app.alerts import repository, schedule, sender, targets
from app.alerts.delivery import attempt
from app.db.engine import Database
from app.db.models import AlertDelivery
from app.main import create_app
from app.settings import Settings
from tests.conftest import BACKEND
from tests.fixtures.alerts import (
    WEEK2,
    WEEK3,
    Receiver,
    add_rule,
    alert_settings,
    drain,
    post_run,
    setup_pipeline,
)
from tests.fixtures.builders import make_run, make_token

# --- where a webhook may go -------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "refused"),
    [
        ("http://169.254.169.254/latest/meta-data/", "link-local"),  # AWS, GCP, Azure
        ("http://[fd00:ec2::254]/latest/", "private"),  # AWS over IPv6 (unique local)
        ("http://100.100.100.200/", "private"),  # Alibaba Cloud (shared 100.64/10)
        ("http://127.0.0.1:5432/", "loopback"),
        ("http://[::1]/", "loopback"),
        ("http://[::ffff:127.0.0.1]/", "loopback"),  # IPv4-mapped
        ("http://2130706433/", "loopback"),  # 127.0.0.1 as one number
        ("http://0x7f.1/", "loopback"),
        ("http://localhost:8080/", "loopback"),
        ("http://api.localhost/", "loopback"),
        ("http://10.1.2.3/", "private"),
        ("http://192.168.0.1/", "private"),
        ("http://0.0.0.0/", "unicast"),
        ("https://hooks.slack.com/services/T/B/x", None),  # a name: checked at send time
        ("https://8.8.8.8/hook", None),
    ],
)
def test_saved_targets(url: str, refused: str | None) -> None:
    problem = targets.saved_target_problem(url, frozenset())
    if refused is None:
        assert problem is None
    else:
        assert problem is not None and refused in problem
        assert "CADENCE_WEBHOOK_ALLOWED_HOSTS" in problem


@pytest.mark.parametrize(
    ("url", "allowed", "ok"),
    [
        ("http://127.0.0.1:8080/h", "127.0.0.1", True),  # host: any port
        ("http://127.0.0.1:8080/h", "127.0.0.1:8080", True),
        ("http://127.0.0.1:9090/h", "127.0.0.1:8080", False),  # another port
        ("http://chat.internal/h", "chat.internal:80", True),  # the scheme's port
        ("http://[::1]:8080/h", "[::1]:8080", True),
        ("http://LOCALHOST/h", "localhost", True),
    ],
)
def test_allowed_hosts(url: str, allowed: str, ok: bool) -> None:
    listed = Settings(webhook_allowed_hosts=allowed).webhook_allowed
    assert (targets.saved_target_problem(url, listed) is None) is ok


def test_api_refuses_internal_targets_unless_allowed(
    db: Database, settings: Settings, admin_headers: dict[str, str]
) -> None:
    rule = {"kind": "cost_over_budget", "threshold": 100}
    metadata = {**rule, "webhook_url": "http://169.254.169.254/latest/meta-data/"}
    with TestClient(create_app(settings, database=db)) as c:
        setup_pipeline(c, admin_headers)
        r = c.post("/api/v1/pipelines/ranker/alerts", json=metadata, headers=admin_headers)
        assert r.status_code == 422
        [field] = r.json()["error"]["fields"]
        assert field["field"] == "webhook_url" and "link-local" in field["reason"]
        local = {**rule, "webhook_url": "http://127.0.0.1:9/hook"}
        r = c.post("/api/v1/pipelines/ranker/alerts", json=local, headers=admin_headers)
        assert r.status_code == 422 and "loopback" in r.json()["error"]["message"]
    with TestClient(create_app(alert_settings(settings), database=db)) as c:
        r = c.post("/api/v1/pipelines/ranker/alerts", json=local, headers=admin_headers)
        assert r.status_code == 201, r.text


def resolving_to(*answers: str) -> Callable[[str, int], list[str]]:
    return lambda host, port: list(answers)


def test_send_time_check_catches_dns_rebinding(receiver: Receiver) -> None:
    """The name was public when the rule was saved; now it answers 127.0.0.1."""
    url = receiver.url.replace("127.0.0.1", "rebind.test")
    assert targets.saved_target_problem(url, frozenset()) is None
    result = attempt(
        url, {"text": "x"}, delivery_id=1, timeout_seconds=2, resolve=resolving_to("127.0.0.1")
    )
    assert result.outcome == "failed" and "loopback" in (result.error or "")
    # One private answer among public ones is enough to refuse.
    mixed = attempt(
        url,
        {"text": "x"},
        delivery_id=1,
        timeout_seconds=2,
        resolve=resolving_to("93.184.216.34", "169.254.169.254"),
    )
    assert mixed.outcome == "failed" and "link-local" in (mixed.error or "")
    assert receiver.requests == []


def test_send_connects_to_the_checked_address() -> None:
    """No second look-up between the check and the connection: the URL is pinned."""
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(204)

    result = attempt(
        "https://bot:s3cret@hooks.example.test:8443/T/B/x",
        {"text": "hi"},
        delivery_id=7,
        timeout_seconds=2,
        resolve=resolving_to("93.184.216.34"),
        transport=httpx.MockTransport(handle),
    )
    assert result.outcome == "delivered"
    [request] = seen
    assert request.url.host == "93.184.216.34" and request.url.port == 8443
    assert request.url.path == "/T/B/x"
    assert request.headers["Host"] == "hooks.example.test:8443"
    assert request.extensions["sni_hostname"] == "hooks.example.test"  # TLS checks the name
    assert request.headers["Authorization"].startswith("Basic ")  # user:pass@ still sent
    assert request.headers["X-Cadence-Delivery"] == "7"


def test_refused_ranges_including_ipv4_inside_ipv6() -> None:
    for text in (
        "169.254.169.254",
        "fd00:ec2::254",
        "100.64.0.1",
        "172.16.0.1",
        "fe80::1",
        "64:ff9b::a9fe:a9fe",
        "2002:a9fe:a9fe::1",
        "::127.0.0.1",
    ):
        assert targets.address_problem(ipaddress.ip_address(text)) is not None
    assert targets.address_problem(ipaddress.ip_address("2606:4700::1111")) is None
    assert targets.address_problem(ipaddress.ip_address("64:ff9b::808:808")) is None  # 8.8.8.8


# --- what readers see -------------------------------------------------------------------


def test_readers_see_scheme_and_host_admins_the_url(
    app_client: TestClient,
    db: Database,
    admin_headers: dict[str, str],
    ingest_headers: dict[str, str],
    receiver: Receiver,
) -> None:
    c = app_client
    setup_pipeline(c, admin_headers)
    secret_url = receiver.url.replace("http://", "http://bot:hunter2@") + "/T0/B0/XXXXSECRET"
    created = add_rule(
        c, admin_headers, kind="cost_over_budget", threshold=100, webhook_url=secret_url
    )
    assert created["webhook_url"] == secret_url and created["webhook_url_masked"] is False
    url = "/api/v1/pipelines/ranker/alerts"
    [seen] = c.get(url).json()["rules"]
    assert seen["webhook_url"] == "http://127.0.0.1" and seen["webhook_url_masked"] is True
    for headers in (ingest_headers, {"Authorization": f"Bearer {make_token(db, 'read')}"}):
        [seen] = c.get(url, headers=headers).json()["rules"]
        assert seen["webhook_url"] == "http://127.0.0.1"
    limited = make_token(db, "admin", name="admin-other", pipelines=["other"])
    [seen] = c.get(url, headers={"Authorization": f"Bearer {limited}"}).json()["rules"]
    assert seen["webhook_url_masked"] is True  # an admin of another pipeline
    [full] = c.get(url, headers=admin_headers).json()["rules"]
    assert full["webhook_url"] == secret_url
    assert c.get(url, headers={"Authorization": "Bearer cad_nope"}).status_code == 401
    post_run(c, ingest_headers)
    html = c.get("/pipelines/ranker").text
    assert "hunter2" not in html and "XXXXSECRET" not in html and "http://127.0.0.1" in html


# --- the outbox -------------------------------------------------------------------------


def deliveries(db: Database) -> list[AlertDelivery]:
    with db.read_latest() as session:
        return list(session.scalars(select(AlertDelivery).order_by(AlertDelivery.id)))


def test_retries_double_and_give_up_after_a_day() -> None:
    t0 = datetime(2026, 11, 30, tzinfo=UTC)
    # Base 30 s: after the n-th failure wait 30 x 2^(n-1) s, so attempt n+1 comes at
    # 30 x (2^n - 1) s: 30, 90, 210, 450, ... attempt 12 at 30 x 2047 = 61,410 s (17 h);
    # the 13th would come at 30 x 4095 = 122,850 s > 86,400 s (24 h): give up.
    now, times = t0, []
    for failures in range(1, 20):
        nxt = schedule.next_attempt(t0, now, failures, 30.0)
        if nxt is None:
            break
        times.append((nxt - t0).total_seconds())
        now = nxt
    assert times[:4] == [30, 90, 210, 450]
    assert times[-1] == 61_410 and failures == 12


def test_retrying_survives_restart_and_gives_up_after_a_day(
    app_client: TestClient,
    db: Database,
    admin_headers: dict[str, str],
    ingest_headers: dict[str, str],
    receiver: Receiver,
) -> None:
    c = app_client
    setup_pipeline(c, admin_headers, budget=500)
    add_rule(c, admin_headers, kind="cost_over_budget", threshold=100, webhook_url=receiver.url)
    receiver.statuses = [503] * 20
    assert c.post("/api/v1/runs", json=make_run(), headers=ingest_headers).status_code == 201
    [row] = deliveries(db)
    now, sent = row.scheduled_at, 0
    while (status := drain(c, now=now).get(row.id)) == "retrying":
        sent += 1
        [row] = deliveries(db)
        assert row.next_attempt_at is not None
        now = row.next_attempt_at  # the schedule lives in the table, not in memory
    assert status == "failed" and sent + 1 == 12 == len(receiver.requests)
    [row] = deliveries(db)
    assert row.attempts == 12 and row.next_attempt_at is None
    assert (row.last_attempt_at - row.scheduled_at).total_seconds() == 61_410


def test_flapping_sends_at_most_one_per_interval_latest_state_wins(
    db: Database,
    settings: Settings,
    admin_headers: dict[str, str],
    ingest_headers: dict[str, str],
    receiver: Receiver,
) -> None:
    with TestClient(
        create_app(alert_settings(settings, alert_min_interval_seconds=600), database=db)
    ) as c:
        setup_pipeline(c, admin_headers, budget=None)
        add_rule(
            c, admin_headers, kind="utilization_floor", threshold=0.4, webhook_url=receiver.url
        )

        def ingest(run_id: str, utilization: float, week: dict[str, str]) -> None:
            run = make_run(run_id=run_id, gpu_utilization=utilization, **week)
            assert c.post("/api/v1/runs", json=run, headers=ingest_headers).status_code == 201

        ingest("low-1", 0.3, {})  # firing: the first notification goes at once
        [first] = deliveries(db)
        assert drain(c, now=first.scheduled_at) == {first.id: "delivered"}
        ingest("high-2", 0.5, WEEK2)  # resolved: waits for the interval
        ingest("low-3", 0.3, WEEK3)  # firing again before it went: nothing to say
        rows = deliveries(db)
        assert [(d.event, d.status) for d in rows] == [
            ("firing", "delivered"),
            ("resolved", "superseded"),
        ]
        ingest(
            "high-4",
            0.6,
            {"started_at": "2026-11-23T08:00:00+00:00", "finished_at": "2026-11-23T22:00:00+00:00"},
        )
        ingest(
            "high-5",
            0.7,
            {"started_at": "2026-11-24T08:00:00+00:00", "finished_at": "2026-11-24T22:00:00+00:00"},
        )
        rows = deliveries(db)
        waiting = rows[-1]
        assert (waiting.event, waiting.status) == ("resolved", "pending")
        assert waiting.scheduled_at == first.scheduled_at + timedelta(seconds=600)
        assert "70.0%" not in waiting.payload["text"]  # still resolved: no new row
        assert drain(c, now=first.scheduled_at + timedelta(seconds=599)) == {}
        assert drain(c, now=waiting.scheduled_at) == {waiting.id: "delivered"}
    assert [h["event"] for h in receiver.requests] == ["firing", "resolved"]


def test_a_change_back_cancels_a_notification_being_retried(
    app_client: TestClient, db: Database, admin_headers: dict[str, str], receiver: Receiver
) -> None:
    """The receiver is down while a rule fires and then resolves: it is not told about
    a firing that is over (latest state wins), and nothing is queued for "resolved"."""
    c = app_client
    setup_pipeline(c, admin_headers)
    rule = add_rule(
        c, admin_headers, kind="cost_over_budget", threshold=100, webhook_url=receiver.url
    )
    receiver.statuses = [503]
    now = datetime.now(UTC)
    with db.write() as session:
        firing = repository.enqueue(
            session, rule["id"], "firing", {"text": "a"}, now=now, min_interval=600
        )
    assert drain(c, now=now) == {firing.id: "retrying"}
    with db.write() as session:
        back = repository.enqueue(
            session, rule["id"], "resolved", {"text": "b"}, now=now, min_interval=600
        )
    assert back.id == firing.id
    assert [(d.event, d.status) for d in deliveries(db)] == [("firing", "superseded")]
    assert drain(c, now=now + timedelta(days=1)) == {}
    assert len(receiver.requests) == 1


def test_an_expired_claim_is_sent_again_after_a_restart(
    app_client: TestClient,
    db: Database,
    admin_headers: dict[str, str],
    ingest_headers: dict[str, str],
    receiver: Receiver,
) -> None:
    """A sender claimed it and died before sending: after its lease another sends it."""
    c = app_client
    setup_pipeline(c, admin_headers)
    add_rule(c, admin_headers, kind="cost_over_budget", threshold=100, webhook_url=receiver.url)
    assert c.post("/api/v1/runs", json=make_run(), headers=ingest_headers).status_code == 201
    [row] = deliveries(db)
    settings = c.app.state.settings  # type: ignore[attr-defined]
    [claimed] = sender.claim(db, settings, row.scheduled_at, 10, secrets.token_hex(16))
    assert claimed.id == row.id
    assert drain(c, now=row.scheduled_at) == {}  # claimed: left alone
    after = row.scheduled_at + sender.lease(settings) + timedelta(seconds=1)
    assert drain(c, now=after) == {row.id: "delivered"}
    assert receiver.delivery_ids == [row.id]


# --- with real commits, threads and the background sender --------------------------------


@pytest.fixture
def committed_app(
    committed_db: Database, settings: Settings
) -> Iterator[Callable[..., TestClient]]:
    """Apps over a real database (each with its sender unless told otherwise)."""

    def make(**overrides: Any) -> TestClient:
        return TestClient(create_app(alert_settings(settings, **overrides), database=committed_db))

    yield make


def wait_for(predicate: Callable[[], bool], what: str) -> None:
    """Wait for the background sender (the timeout only stops a broken test hanging)."""
    done = threading.Event()
    for _ in range(600):
        if predicate():
            return
        done.wait(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_slow_receiver_does_not_hold_ingests(
    committed_app: Callable[..., TestClient], committed_db: Database, receiver: Receiver
) -> None:
    receiver.hold = threading.Event()
    admin = {"Authorization": f"Bearer {make_token(committed_db, 'admin')}"}
    ingest = {"Authorization": f"Bearer {make_token(committed_db, 'ingest')}"}
    try:
        with committed_app(alert_sender=True) as c:
            setup_pipeline(c, admin, budget=500)
            add_rule(c, admin, kind="cost_over_budget", threshold=100, webhook_url=receiver.url)
            add_rule(c, admin, kind="utilization_floor", threshold=0.9, webhook_url=receiver.url)
            assert c.post("/api/v1/runs", json=make_run(), headers=ingest).status_code == 201
            # The sender took a notification and the receiver holds it, unanswered ...
            assert receiver.entered.wait(30)
            # ... while ingests, and reads, go on and are answered.
            for n in range(2, 6):
                run = make_run(run_id=f"r{n}", **WEEK2)
                assert c.post("/api/v1/runs", json=run, headers=ingest).status_code == 201
            assert c.get("/api/v1/pipelines/ranker").status_code == 200
            assert receiver.requests == []
            assert {d.status for d in deliveries(committed_db)} == {"pending"}
            receiver.hold.set()
            wait_for(
                lambda: {d.status for d in deliveries(committed_db)} == {"delivered"},
                "both notifications delivered",
            )
        assert sorted(h["kind"] for h in receiver.requests) == [
            "cost_over_budget",
            "utilization_floor",
        ]
    finally:
        receiver.hold.set()


def test_queued_notifications_survive_a_restart(
    committed_app: Callable[..., TestClient], committed_db: Database, receiver: Receiver
) -> None:
    admin = {"Authorization": f"Bearer {make_token(committed_db, 'admin')}"}
    ingest = {"Authorization": f"Bearer {make_token(committed_db, 'ingest')}"}
    with committed_app(alert_sender=False) as c:  # stops before anything is sent
        setup_pipeline(c, admin, budget=500)
        add_rule(c, admin, kind="cost_over_budget", threshold=100, webhook_url=receiver.url)
        assert c.post("/api/v1/runs", json=make_run(), headers=ingest).status_code == 201
    [row] = deliveries(committed_db)
    assert row.status == "pending" and receiver.requests == []
    with committed_app(alert_sender=True):  # the next process sends it
        wait_for(lambda: deliveries(committed_db)[0].status == "delivered", "the delivery")
    assert receiver.delivery_ids == [row.id]


def queue(db: Database, client: TestClient, admin: dict[str, str], url: str, n: int) -> list[int]:
    setup_pipeline(client, admin)
    rule = add_rule(client, admin, kind="cost_over_budget", threshold=100, webhook_url=url)
    now = datetime.now(UTC)
    with db.write() as session:
        rows = [
            AlertDelivery(
                rule_id=rule["id"],
                event="firing",
                payload={"text": str(i)},
                status="pending",
                attempts=0,
                scheduled_at=now,
                next_attempt_at=now,
            )
            for i in range(n)
        ]
        session.add_all(rows)
        session.flush()
        return [r.id for r in rows]


def test_two_drainers_send_each_notification_once(
    committed_app: Callable[..., TestClient], committed_db: Database, receiver: Receiver
) -> None:
    admin = {"Authorization": f"Bearer {make_token(committed_db, 'admin')}"}
    with committed_app(alert_sender=False) as c:
        ids = queue(committed_db, c, admin, receiver.url, 20)
        settings = c.app.state.settings  # type: ignore[attr-defined]
    start = threading.Barrier(2)
    sent: list[dict[int, str]] = []

    def drainer() -> None:
        start.wait()
        while batch := sender.drain(committed_db, settings, limit=3):
            sent.append(batch)

    threads = [threading.Thread(target=drainer) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert sorted(receiver.delivery_ids) == ids  # every one, each once
    assert sorted(i for batch in sent for i in batch) == ids


@pytest.mark.skipif(BACKEND != "postgresql", reason="SKIP LOCKED: in the PostgreSQL pass")
def test_a_claim_in_progress_is_skipped_not_waited_for(
    committed_app: Callable[..., TestClient], committed_db: Database, receiver: Receiver
) -> None:
    """Sender A is inside its claim transaction (rows locked, not yet marked); sender B
    claims at the same moment and gets the other rows, without waiting for A."""
    admin = {"Authorization": f"Bearer {make_token(committed_db, 'admin')}"}
    with committed_app(alert_sender=False) as c:
        ids = queue(committed_db, c, admin, receiver.url, 6)
        settings = c.app.state.settings  # type: ignore[attr-defined]
    now = datetime.now(UTC) + timedelta(seconds=1)
    with committed_db.write() as a:
        first = repository.claim_due(
            a, now=now, limit=4, lease=timedelta(minutes=1), token="a" * 32
        )
        assert [x.id for x in first] == ids[:4]
        other = sender.drain(committed_db, settings, now=now)  # B, while A is open
        assert sorted(other) == ids[4:]
    assert sorted(receiver.delivery_ids) == ids[4:]
    assert sender.drain(committed_db, settings, now=now) == {}  # A's claims hold
    with committed_db.write() as s:  # A died: its lease runs out
        s.execute(update(AlertDelivery).values(claimed_until=now))
    later = now + timedelta(seconds=1)
    assert sorted(sender.drain(committed_db, settings, now=later)) == ids[:4]
    assert sorted(receiver.delivery_ids) == ids


def test_public_url_makes_links_absolute_and_is_checked() -> None:
    from app.alerts.rules import with_public_links

    body = {"text": "x", "url": "/pipelines/ranker#alerts"}
    assert with_public_links(body, "") is body  # unset: relative, as before
    assert with_public_links(body, "https://c.example.com/cadence/")["url"] == (
        "https://c.example.com/cadence/pipelines/ranker#alerts"
    )
    assert Settings(public_url="https://c.example.com").public_url == "https://c.example.com"
    for bad in ("c.example.com", "ftp://c.example.com", "https://c.example.com/?a=1"):
        with pytest.raises(ValueError, match="public_url"):
            Settings(public_url=bad)
