"""Budget and goodput alerts: pure rules, the API, and webhooks end to end against a
local HTTP receiver (SQLite and PostgreSQL)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.alerts import rules
from app.alerts.delivery import attempt
from tests.fixtures.alerts import (
    WEEK2,
    Receiver,
    add_rule,
    closed_port_url,
    drain,
    post_run,
    setup_pipeline,
)
from tests.fixtures.builders import make_run

# --- pure rules --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "value", "threshold", "expected"),
    [
        ("cost_over_budget", 175.0, 100.0, True),
        ("cost_over_budget", 100.0, 100.0, False),  # at the threshold is not over it
        ("cost_over_budget", 60.0, 100.0, False),
        ("goodput_drop", 12.0, 10.0, True),
        ("goodput_drop", -5.0, 10.0, False),  # goodput went up
        ("utilization_floor", 0.31, 0.4, True),
        ("utilization_floor", 0.4, 0.4, False),
        ("utilization_floor", None, 0.4, None),
        ("cost_over_budget", float("nan"), 100.0, None),
    ],
)
def test_is_firing(kind: str, value: float | None, threshold: float, expected: bool | None) -> None:
    assert rules.is_firing(kind, value, threshold) is expected


@pytest.mark.parametrize(
    ("was", "now", "event"),
    [
        (False, True, "firing"),
        (True, True, None),  # still firing: no new notification
        (True, False, "resolved"),
        (False, False, None),
        (True, None, None),  # nothing to compare: keep the state, say nothing
        (False, None, None),
    ],
)
def test_transition_fires_on_change_only(was: bool, now: bool | None, event: str | None) -> None:
    assert rules.transition(was, now) == event


def test_metric_values() -> None:
    m = rules.Metrics(
        bill_at_risk_usd=2456.0,
        budget_usd=1400.0,
        goodput_latest=0.60,
        goodput_previous=0.75,
        latest_utilization=0.3,
    )
    assert m.value("cost_over_budget") == pytest.approx(175.43, abs=0.01)
    assert m.value("goodput_drop") == pytest.approx(15.0)
    assert m.value("utilization_floor") == 0.3
    assert rules.Metrics(bill_at_risk_usd=10).value("cost_over_budget") is None
    assert rules.Metrics(goodput_latest=0.5).value("goodput_drop") is None


def test_payload_text_is_slack_compatible() -> None:
    m = rules.Metrics(bill_at_risk_usd=2456.0, expected_bill_usd=2300.0, budget_usd=1400.0)
    body = rules.payload(
        pipeline="recsys-ranker",
        rule_id=7,
        kind="cost_over_budget",
        event="firing",
        value=m.value("cost_over_budget") or 0,
        threshold=100.0,
        metrics=m,
        at="t",
    )
    assert body["text"] == (
        "[Cadence] recsys-ranker: at the current cadence the expected bill is $2,300 a "
        "month and the p90 bill $2,456, 175% of the $1,400 budget (threshold 100%): the "
        "month does not fit the budget at a 10% risk tolerance"
    )
    assert body["pipeline"] == "recsys-ranker" and body["event"] == "firing"
    assert body["kind"] == "cost_over_budget" and body["threshold"] == 100.0
    assert body["url"] == "/pipelines/recsys-ranker#alerts"
    resolved = rules.payload(
        pipeline="p",
        rule_id=1,
        kind="utilization_floor",
        event="resolved",
        value=0.5,
        threshold=0.4,
        metrics=rules.Metrics(latest_run_id="r9"),
        at="t",
    )
    assert resolved["text"].startswith("[Cadence] p: resolved: latest run (r9) GPU utilization")


def test_payload_text_escapes_chat_markup() -> None:
    run_id = "<!channel> & <https://evil.test|your invoice>"
    body = rules.payload(
        pipeline="a<b>&c",
        rule_id=1,
        kind="utilization_floor",
        event="firing",
        value=0.1,
        threshold=0.4,
        metrics=rules.Metrics(latest_run_id=run_id),
        at="t",
    )
    assert body["text"] == (
        "[Cadence] a&lt;b&gt;&amp;c: latest run (&lt;!channel&gt; &amp; "
        "&lt;https://evil.test|your invoice&gt;) GPU utilization 10.0% (floor 40.0%)"
    )
    assert "<" not in body["text"] and ">" not in body["text"]
    assert body["pipeline"] == "a<b>&c"  # structured fields are data, not markup
    weeks = rules.Metrics(
        goodput_latest=0.5, goodput_previous=0.7, latest_week="<w2>", previous_week="<w1>"
    )
    text = rules.payload(
        pipeline="p",
        rule_id=1,
        kind="goodput_drop",
        event="firing",
        value=20.0,
        threshold=10.0,
        metrics=weeks,
        at="t",
    )["text"]
    assert "&lt;w1&gt; 70.0% -> &lt;w2&gt; 50.0%" in text


@pytest.mark.parametrize(
    ("kind", "threshold", "ok"),
    [
        ("cost_over_budget", 100, True),
        ("cost_over_budget", 0, False),
        ("goodput_drop", 10, True),
        ("goodput_drop", 101, False),
        ("utilization_floor", 0.4, True),
        ("utilization_floor", 40, False),
        ("utilization_floor", float("inf"), False),
    ],
)
def test_threshold_ranges(kind: str, threshold: float, ok: bool) -> None:
    assert (rules.threshold_problem(kind, threshold) is None) is ok


@pytest.mark.parametrize(
    ("url", "ok"),
    [
        ("https://hooks.slack.com/services/T/B/x", True),
        ("http://127.0.0.1:9/hook", True),
        ("ftp://example.com/hook", False),
        ("javascript:alert(1)", False),
        ("https://", False),
        ("https://exa mple.com", False),
        ("http://example.com:99999/", False),
    ],
)
def test_webhook_urls(url: str, ok: bool) -> None:
    assert (rules.url_problem(url) is None) is ok


# --- API ---------------------------------------------------------------------------------


def test_rule_validation_and_auth(
    app_client: TestClient, admin_headers: dict[str, str], ingest_headers: dict[str, str]
) -> None:
    c = app_client
    setup_pipeline(c, admin_headers)
    url = "/api/v1/pipelines/ranker/alerts"
    good = {"kind": "cost_over_budget", "threshold": 100, "webhook_url": "https://x.test/h"}
    assert c.post(url, json=good).status_code == 401
    assert c.post(url, json=good, headers=ingest_headers).status_code == 403
    assert (
        c.post("/api/v1/pipelines/nope/alerts", json=good, headers=admin_headers).status_code == 404
    )

    r = c.post(url, json={**good, "webhook_url": "ftp://x.test/h"}, headers=admin_headers)
    assert r.status_code == 422
    assert r.json()["error"]["fields"][0]["field"] == "webhook_url"
    assert "http:// or https://" in r.json()["error"]["fields"][0]["reason"]

    r = c.post(
        url, json={**good, "kind": "utilization_floor", "threshold": 40}, headers=admin_headers
    )
    assert r.status_code == 422
    [field] = r.json()["error"]["fields"]
    assert field["field"] == "threshold" and "did you mean 0.4?" in field["reason"]

    r = c.post(url, json={**good, "kind": "cost_overrun"}, headers=admin_headers)
    assert r.status_code == 422 and r.json()["error"]["fields"][0]["field"] == "kind"
    r = c.post(url, json={**good, "threshold": -1}, headers=admin_headers)
    assert r.status_code == 422 and r.json()["error"]["fields"][0]["field"] == "threshold"
    r = c.post(url, json={**good, "webhook": "x"}, headers=admin_headers)
    assert r.status_code == 422  # unknown field

    created = c.post(url, json=good, headers=admin_headers).json()
    assert created["firing"] is False and created["kind"] == "cost_over_budget"
    listed = c.get(url).json()
    assert [r["id"] for r in listed["rules"]] == [created["id"]]
    assert c.get(f"{url}/deliveries?limit=1000").status_code == 422
    assert c.get(f"{url}/deliveries").json()["deliveries"] == []

    assert c.delete(f"{url}/{created['id']}").status_code == 401
    assert c.delete(f"{url}/{created['id']}", headers=admin_headers).status_code == 204
    assert c.delete(f"{url}/{created['id']}", headers=admin_headers).status_code == 404
    assert c.get(url).json()["rules"] == []


# --- end to end --------------------------------------------------------------------------


def current(c: TestClient) -> dict[str, Any]:
    """The projection at the pipeline's current cadence (1 a week)."""
    page = c.get("/api/v1/pipelines/ranker/projection?cadences=1").json()
    return next(a for a in page["projections"]["baseline"]["cadences"] if a["runs_per_week"] == 1)


def p90_now(c: TestClient) -> float:
    return float(current(c)["bill_p90_usd"])


def test_cost_over_budget_fires_once_and_resolves(
    app_client: TestClient,
    admin_headers: dict[str, str],
    ingest_headers: dict[str, str],
    receiver: Receiver,
) -> None:
    c = app_client
    setup_pipeline(c, admin_headers, budget=1000)
    rule = add_rule(
        c, admin_headers, kind="cost_over_budget", threshold=100, webhook_url=receiver.url
    )
    # 8 workers x 14 h x $2.50 = $280 a run; weekly: 280 x 52/12 = $1,213 a month
    # expected, but the rule reads the pipeline's cost basis, the p90 bill by default:
    # the page's forecast (one basis). With one retraining to learn from, the cost series
    # borrows the organisation's spread (the fixed prior), so the p90 is above the
    # 5 x 280 = $1,400 of five identical retrainings; the alert says the page's figure.
    post_run(c, ingest_headers, run_id="r1")
    assert len(receiver.requests) == 1
    [hook] = receiver.requests
    p90 = p90_now(c)
    at = current(c)
    assert at["expected_bill_usd"] == pytest.approx(280 * 52 / 12) and p90 > 1400.0
    assert hook["text"] == (
        "[Cadence] ranker: at the current cadence the expected bill is $1,213 a month and "
        f"the p90 bill ${p90:,.0f}, {p90 / 10:.0f}% of the $1,000 budget (threshold 100%): "
        "the month does not fit the budget at a 10% risk tolerance"
    )
    assert hook["pipeline"] == "ranker" and hook["kind"] == "cost_over_budget"
    assert hook["event"] == "firing" and hook["threshold"] == 100
    assert hook["value"] == pytest.approx(p90 / 10)
    assert hook["url"] == "/pipelines/ranker#alerts" and hook["rule_id"] == rule["id"]

    # Still over budget: state unchanged, no new webhook.
    post_run(c, ingest_headers, run_id="r2", **WEEK2)
    retry = make_run(run_id="r2", **WEEK2)
    assert c.post("/api/v1/runs", json=retry, headers=ingest_headers).status_code == 200
    assert len(receiver.requests) == 1
    state = c.get("/api/v1/pipelines/ranker/alerts").json()["rules"][0]
    assert state["firing"] is True and state["since"] is not None
    assert state["last_value"] == pytest.approx(p90_now(c) / 10)  # two retrainings now

    # A bigger budget, then evaluation: one "resolved".
    setup_pipeline(c, admin_headers, budget=2000)
    r = c.post("/api/v1/pipelines/ranker/alerts/evaluate", headers=admin_headers)
    assert r.status_code == 200, r.text
    assert [(d["event"], d["status"]) for d in r.json()["deliveries"]] == [("resolved", "pending")]
    assert len(receiver.requests) == 1  # queued, not sent by the request
    drain(c)
    assert len(receiver.requests) == 2
    assert receiver.requests[1]["event"] == "resolved"
    assert receiver.requests[1]["text"].startswith(
        "[Cadence] ranker: resolved: at the current cadence the expected bill"
    )
    # Evaluating again changes nothing.
    c.post("/api/v1/pipelines/ranker/alerts/evaluate", headers=admin_headers)
    assert drain(c) == {}
    assert len(receiver.requests) == 2
    assert c.post("/api/v1/pipelines/ranker/alerts/evaluate").status_code == 401

    url = "/api/v1/pipelines/ranker/alerts/deliveries"
    found = c.get(url, headers=admin_headers).json()["deliveries"]
    assert [(d["event"], d["status"], d["attempts"]) for d in found] == [
        ("resolved", "delivered", 1),
        ("firing", "delivered", 1),
    ]
    assert found[1]["response_status"] == 200 and found[1]["payload"]["text"] == hook["text"]
    assert sorted(receiver.delivery_ids) == sorted(d["id"] for d in found)
    assert found[0]["next_attempt_at"] is None and found[0]["last_attempt_at"] is not None
    page = c.get("/api/v1/pipelines/ranker/alerts/deliveries?limit=1&before=" + str(found[0]["id"]))
    assert [d["id"] for d in page.json()["deliveries"]] == [found[1]["id"]]
    # Pages say the total and where the next one starts; the last says there is none.
    first = c.get("/api/v1/pipelines/ranker/alerts/deliveries?limit=1").json()
    assert first["total"] == 2 and first["next_before"] == found[0]["id"]
    assert page.json()["total"] == 2 and page.json()["next_before"] is None


def test_retries_5xx_later_with_backoff_then_delivers(
    app_client: TestClient,
    admin_headers: dict[str, str],
    ingest_headers: dict[str, str],
    receiver: Receiver,
) -> None:
    c = app_client
    setup_pipeline(c, admin_headers, budget=500)
    add_rule(c, admin_headers, kind="cost_over_budget", threshold=100, webhook_url=receiver.url)
    receiver.statuses = [500, 503]
    r = c.post("/api/v1/runs", json=make_run(), headers=ingest_headers)
    assert r.status_code == 201 and receiver.requests == []  # queued, not sent
    # The notification was queued at the real time of the ingest; T0 is a minute later.
    T0 = datetime.now(UTC) + timedelta(minutes=1)  # a clock the test sets
    [(pk, status)] = drain(c, now=T0).items()
    assert status == "retrying"
    url = "/api/v1/pipelines/ranker/alerts/deliveries"
    [d] = c.get(url, headers=admin_headers).json()["deliveries"]
    # Base 30 s: the second attempt waits 30 s, the third 60 s.
    assert datetime.fromisoformat(d["next_attempt_at"]) == T0 + timedelta(seconds=30)
    assert drain(c, now=T0 + timedelta(seconds=29)) == {}  # not due yet
    assert drain(c, now=T0 + timedelta(seconds=30)) == {pk: "retrying"}
    [d] = c.get(url, headers=admin_headers).json()["deliveries"]
    assert datetime.fromisoformat(d["next_attempt_at"]) == T0 + timedelta(seconds=90)
    assert drain(c, now=T0 + timedelta(seconds=90)) == {pk: "delivered"}
    assert len(receiver.requests) == 3 and receiver.delivery_ids == [pk, pk, pk]
    [d] = c.get(url, headers=admin_headers).json()["deliveries"]
    assert (d["status"], d["attempts"], d["response_status"]) == ("delivered", 3, 200)
    assert d["error"] == "attempt 1: HTTP 500\nattempt 2: HTTP 503"
    assert d["next_attempt_at"] is None
    # A reader learns that it took three attempts, not what the receiver answered.
    [seen] = c.get(url).json()["deliveries"]
    assert seen["response_status"] is None and "HTTP" not in seen["error"]


def test_client_error_is_not_retried(receiver: Receiver) -> None:
    receiver.statuses = [404]
    result = attempt(
        receiver.url, {"text": "x"}, delivery_id=1, timeout_seconds=2, allowed_hosts={"127.0.0.1"}
    )
    assert (result.outcome, result.response_status, result.error) == ("failed", 404, "HTTP 404")
    assert receiver.delivery_ids == [1]


def test_unreachable_webhook_is_retried_and_ingest_succeeds(
    app_client: TestClient, admin_headers: dict[str, str], ingest_headers: dict[str, str]
) -> None:
    c = app_client
    setup_pipeline(c, admin_headers, budget=500)
    add_rule(
        c, admin_headers, kind="cost_over_budget", threshold=100, webhook_url=closed_port_url()
    )
    post_run(c, ingest_headers)
    url = "/api/v1/pipelines/ranker/alerts/deliveries"
    [d] = c.get(url, headers=admin_headers).json()["deliveries"]
    assert (d["status"], d["attempts"], d["response_status"]) == ("retrying", 1, None)
    assert d["error"].startswith("attempt 1: ConnectError")
    # Readers are not told which ports answer.
    [seen] = c.get(url).json()["deliveries"]
    assert "ConnectError" not in seen["error"] and seen["error"] == (
        "the webhook did not accept it (admins see the details)"
    )
    html = c.get("/pipelines/ranker").text
    assert 'data-outbox="pending:0 retrying:1 failed:0"' in html
    assert 'data-status="retrying"' in html and "(next try " in html
    # The rule still counts as firing: it is not queued again on every run.
    post_run(c, ingest_headers, run_id="r2", **WEEK2)
    assert len(c.get(url).json()["deliveries"]) == 1


def test_utilization_floor_through_batches(
    app_client: TestClient,
    admin_headers: dict[str, str],
    ingest_headers: dict[str, str],
    receiver: Receiver,
) -> None:
    c = app_client
    setup_pipeline(c, admin_headers, budget=None)
    add_rule(c, admin_headers, kind="utilization_floor", threshold=0.4, webhook_url=receiver.url)
    low = make_run(run_id="low", gpu_utilization=0.3)
    assert (
        c.post("/api/v1/runs/batch", json={"runs": [low]}, headers=ingest_headers).status_code
        == 201
    )
    drain(c)
    assert [h["event"] for h in receiver.requests] == ["firing"]
    assert "GPU utilization 30.0% (floor 40.0%)" in receiver.requests[0]["text"]
    # Same batch again: nothing new stored, nothing evaluated.
    assert (
        c.post("/api/v1/runs/batch", json={"runs": [low]}, headers=ingest_headers).status_code
        == 200
    )
    high = make_run(run_id="high", gpu_utilization=0.5, **WEEK2)
    c.post("/api/v1/runs/batch", json={"runs": [high]}, headers=ingest_headers)
    drain(c)
    assert [h["event"] for h in receiver.requests] == ["firing", "resolved"]


def test_goodput_drop_week_over_week(
    app_client: TestClient,
    admin_headers: dict[str, str],
    ingest_headers: dict[str, str],
    receiver: Receiver,
) -> None:
    c = app_client
    setup_pipeline(c, admin_headers, budget=None)
    add_rule(c, admin_headers, kind="goodput_drop", threshold=10, webhook_url=receiver.url)
    good = make_run(
        run_id="w45",
        gpu_utilization=0.9,
        data_stall_hours=0,
        checkpoint_hours=0,
        scheduling_wait_hours=0,
        interruptions=[],
    )
    post_run(c, ingest_headers, **good)
    assert receiver.requests == []  # no previous week yet
    post_run(c, ingest_headers, run_id="w46", gpu_utilization=0.3, **WEEK2)  # 2026-W46
    [hook] = receiver.requests
    assert hook["event"] == "firing" and hook["kind"] == "goodput_drop"
    assert hook["value"] > 10
    assert "2026-W45" in hook["text"] and "2026-W46" in hook["text"]


def test_pipeline_page_shows_alerts(
    app_client: TestClient,
    admin_headers: dict[str, str],
    ingest_headers: dict[str, str],
    receiver: Receiver,
) -> None:
    c = app_client
    setup_pipeline(c, admin_headers, budget=1000)
    empty = c.get("/pipelines/ranker").text
    assert 'data-empty="alerts"' in empty and "No alert rules yet" in empty
    assert "curl" not in empty  # empty states say what to do in words
    hostile = receiver.url + "?<script>x</script>"
    add_rule(c, admin_headers, kind="cost_over_budget", threshold=100, webhook_url=hostile)
    post_run(c, ingest_headers)
    html = c.get("/pipelines/ranker").text
    p90 = p90_now(c)  # the page's own forecast (test_cost_over_budget_fires_once_and_resolves)
    assert 'id="alerts"' in html and 'data-state="firing"' in html
    assert "firing</strong> since" in html and f"{p90 / 10:.0f}% of budget" in html
    assert 'data-status="delivered"' in html
    assert f"the p90 bill ${p90:,.0f}, {p90 / 10:.0f}% of the $1,000 budget" in html
    assert "<script>x</script>" not in html


def test_ingest_without_rules_sends_nothing(
    app_client: TestClient, ingest_headers: dict[str, str], receiver: Receiver
) -> None:
    post_run(app_client, ingest_headers)
    assert receiver.requests == []
