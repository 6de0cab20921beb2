"""Alert rules in the browser: an admin signed in (open read mode: reads need nothing)
adds, pauses, resumes, test-sends and deletes rules; each change is audited and every
refusal says why."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from app.alerts import sender
from app.db.engine import Database
from app.db.models import AlertDelivery, AlertRule
from app.main import create_app
from app.settings import Settings
from tests.fixtures.alerts import Receiver, alert_settings
from tests.fixtures.builders import make_token
from tests.fixtures.security import HTML, csrf_value, sign_in, token_settings


@pytest.fixture
def browser(
    db: Database, settings: Settings, admin_headers: dict[str, str]
) -> Iterator[TestClient]:
    with TestClient(create_app(alert_settings(settings), database=db), follow_redirects=False) as c:
        body = {"price_per_gpu_hour": 2.5, "monthly_budget_usd": 1000, "runs_per_week": 1}
        assert c.put("/api/v1/pipelines/ranker", json=body, headers=admin_headers).is_success
        yield c


def rules(db: Database) -> list[AlertRule]:
    with db.read_latest() as s:
        return list(s.scalars(select(AlertRule).order_by(AlertRule.id)))


def test_readers_see_rules_and_a_sign_in_link(browser: TestClient) -> None:
    page = browser.get("/pipelines/ranker/alerts", headers=HTML)
    assert page.status_code == 200 and 'data-empty="rules"' in page.text
    assert "sign in with an admin token" in page.text and "Add rule" not in page.text
    # Without a session nothing posts: the CSRF check refuses first.
    r = browser.post("/pipelines/ranker/alerts", data={"kind": "goodput_drop", "threshold": "5"})
    assert r.status_code == 403 and "CSRF" in r.text
    assert rules(browser.app.state.database) == []  # type: ignore[attr-defined]


def test_an_admin_manages_a_rule_end_to_end(
    browser: TestClient, db: Database, receiver: Receiver
) -> None:
    sign_in(browser, make_token(db, "admin", name="alice"))
    page = browser.get("/pipelines/ranker/alerts", headers=HTML)
    csrf = csrf_value(page.text)
    # Per-field messages, nothing stored, what was typed kept, focus on the summary.
    bad = {"csrf": csrf, "kind": "utilization_floor", "threshold": "lots", "webhook_url": "x"}
    r = browser.post("/pipelines/ranker/alerts", data=bad)
    assert r.status_code == 422 and 'id="e-threshold"' in r.text and 'value="lots"' in r.text
    assert 'id="form-errors" tabindex="-1" autofocus' in r.text and rules(db) == []
    refused = {**bad, "threshold": "0.4", "webhook_url": "http://169.254.169.254/latest/"}
    r = browser.post("/pipelines/ranker/alerts", data=refused)
    assert r.status_code == 422 and 'id="e-webhook_url"' in r.text and "link-local" in r.text
    good = {**bad, "threshold": "0.4", "webhook_url": receiver.url}
    r = browser.post("/pipelines/ranker/alerts", data=good)
    assert r.status_code == 303 and r.headers["location"].endswith("done=created")
    # The page it lands on moves focus to the success message (as errors get it).
    shown = browser.get(r.headers["location"]).text
    assert 'role="status" data-done id="done" tabindex="-1" autofocus>Alert rule added.' in shown
    [rule] = rules(db)
    assert rule.kind == "utilization_floor" and rule.threshold == 0.4 and rule.enabled
    path = f"/pipelines/ranker/alerts/{rule.id}"
    assert browser.post(path, data={"csrf": csrf, "action": "pause"}).status_code == 303
    assert not rules(db)[0].enabled
    assert browser.post(path, data={"csrf": csrf, "action": "resume"}).status_code == 303
    assert rules(db)[0].enabled and rules(db)[0].evaluated_changes is None
    # A test send goes through the outbox to the receiver, marked as a test.
    assert browser.post(path, data={"csrf": csrf, "action": "test"}).status_code == 303
    sender.drain(db, browser.app.state.settings)  # type: ignore[attr-defined]
    [hook] = receiver.requests
    assert hook["event"] == "test" and "test of alert rule #" in hook["text"]
    assert "sent by alice" in hook["text"]
    assert browser.post(path, data={"csrf": csrf, "action": "explode"}).status_code == 422
    assert browser.post(path, data={"csrf": csrf, "action": "delete"}).status_code == 303
    assert rules(db) == []
    with db.read_latest() as s:
        assert list(s.scalars(select(AlertDelivery))) == []  # its history goes with it
    # Every change is in the audit trail, by who made it.
    history = browser.get("/pipelines/ranker/settings", headers=HTML).text
    assert history.count("<td>alice</td><td>alert rule</td>") == 4  # add, pause, resume, delete


def test_a_read_token_session_cannot_change_rules(
    db: Database, settings: Settings, database_url: str, admin_headers: dict[str, str]
) -> None:
    with TestClient(
        create_app(token_settings(database_url), database=db), follow_redirects=False
    ) as c:
        body = {"price_per_gpu_hour": 2.5}
        assert c.put("/api/v1/pipelines/ranker", json=body, headers=admin_headers).is_success
        sign_in(c, make_token(db, "read", name="bob"))
        page = c.get("/pipelines/ranker/alerts", headers=HTML)
        assert page.status_code == 200 and "does not have the admin scope" in page.text
        data = {"csrf": csrf_value(page.text), "kind": "goodput_drop", "threshold": "5",
                "webhook_url": "https://hooks.example.com/x"}  # fmt: skip
        r = c.post("/pipelines/ranker/alerts", data=data)
        assert r.status_code == 403 and "admin scope" in r.text
