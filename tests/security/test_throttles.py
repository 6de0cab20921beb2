"""Abuse that cost nothing (issue 36 item 8): wrong sign-in tokens and alert test sends
are throttled per client and per rule (429 with Retry-After), in one bounded structure."""

from __future__ import annotations

from fastapi.testclient import TestClient

from app.db.engine import Database
from app.main import create_app
from app.security.throttle import Throttle
from app.settings import Settings
from tests.fixtures.alerts import Receiver, alert_settings
from tests.fixtures.builders import make_token
from tests.fixtures.security import HTML, csrf_value, sign_in


def test_wrong_tokens_at_login_are_throttled_per_client(db: Database, settings: Settings) -> None:
    three = settings.model_copy(update={"login_failures_per_minute": 3})
    good = make_token(db, "admin")
    with TestClient(create_app(three, database=db), follow_redirects=False) as c:
        for _ in range(3):
            assert sign_in(c, "cad_wrong").status_code == 401
        refused = sign_in(c, "cad_wrong")
        assert refused.status_code == 429 and "Too many wrong tokens" in refused.text
        assert 1 <= int(refused.headers["Retry-After"]) <= 60
        # Even the right token waits: a guesser cannot tell a hit while throttled.
        assert sign_in(c, good).status_code == 429


def test_a_rule_is_test_sent_at_most_n_times_a_minute(
    db: Database, settings: Settings, admin_headers: dict[str, str], receiver: Receiver
) -> None:
    limited = alert_settings(settings).model_copy(update={"alert_tests_per_minute": 2})
    with TestClient(create_app(limited, database=db), follow_redirects=False) as c:
        body = {"price_per_gpu_hour": 2.5, "monthly_budget_usd": 1000, "runs_per_week": 1}
        assert c.put("/api/v1/pipelines/ranker", json=body, headers=admin_headers).is_success
        sign_in(c, make_token(db, "admin", name="alice"))
        csrf = csrf_value(c.get("/pipelines/ranker/alerts", headers=HTML).text)
        rule = {"csrf": csrf, "kind": "utilization_floor", "threshold": "0.4",
                "webhook_url": receiver.url}  # fmt: skip
        assert c.post("/pipelines/ranker/alerts", data=rule).status_code == 303
        rule_id = c.get("/api/v1/pipelines/ranker/alerts", headers=admin_headers).json()
        path = f"/pipelines/ranker/alerts/{rule_id['rules'][0]['id']}"
        answers = [c.post(path, data={"csrf": csrf, "action": "test"}) for _ in range(4)]
        assert [a.status_code for a in answers] == [303, 303, 429, 429]
        assert "Retry-After" in answers[2].headers
        # Pausing is not a test send: not throttled.
        assert c.post(path, data={"csrf": csrf, "action": "pause"}).status_code == 303


def test_the_throttle_is_bounded_and_forgets_after_a_minute() -> None:
    throttle = Throttle(limit=2, keys=100)
    for n in range(1000):  # a flood of fresh addresses
        throttle.add(f"10.0.{n // 256}.{n % 256}", now=0.0)
    assert len(throttle) == 100  # at most `keys` keys, each at most `limit` times
    throttle.add("a", now=0.0)
    throttle.add("a", now=10.0)
    assert throttle.wait("a", now=30.0) == 30  # the first leaves the minute at 60 s
    assert throttle.wait("a", now=60.5) == 0
