"""/metrics (HTTP, ingestion and business metrics), request ids and JSON access logs."""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import create_engine

from app.db.engine import Database
from app.main import create_app
from app.settings import Settings
from tests.fixtures.builders import (
    demo_week,
    last_week_day,
    make_run,
    make_token,
    this_month_run,
)
from tests.fixtures.metrics import scrape, value


def test_http_counters_use_route_templates(client: TestClient) -> None:
    before = scrape(client)
    key = {"method": "GET", "route": "/api/v1/runs/{pk}", "status": "404"}
    assert value(before, "cadence_http_requests_total", **key) is None
    assert client.get("/api/v1/runs/987654").status_code == 404
    assert client.get("/api/v1/runs/987655").status_code == 404
    assert client.get("/no/such/page-123").status_code == 404
    samples = scrape(client)
    assert value(samples, "cadence_http_requests_total", **key) == 2
    other = {"method": "GET", "route": "other", "status": "404"}
    assert value(samples, "cadence_http_requests_total", **other) == 1
    routes = {dict(labels).get("route") for _, labels in samples}
    assert not any(r and ("987654" in r or "page-123" in r) for r in routes)
    # The histogram has its buckets, per route template.
    bucket = {"method": "GET", "route": "/api/v1/runs/{pk}"}
    for le in ("0.005", "0.1", "1.0", "10.0"):
        got = value(samples, "cadence_http_request_duration_seconds_bucket", le=le, **bucket)
        assert got is not None, le
    assert value(samples, "cadence_http_request_duration_seconds_bucket", le="+Inf", **bucket) == 2
    assert value(samples, "cadence_http_request_duration_seconds_count", **bucket) == 2
    assert (
        value(samples, "cadence_http_requests_total", method="GET", route="/metrics", status="200")
        == 1
    )


def test_ingestion_counters(client: TestClient, ingest_headers: dict[str, str]) -> None:
    assert client.post("/api/v1/runs", json=make_run(), headers=ingest_headers).status_code == 201
    assert client.post("/api/v1/runs", json=make_run(), headers=ingest_headers).status_code == 200
    bad = client.post("/api/v1/runs", json=make_run(workers=0), headers=ingest_headers)
    assert bad.status_code == 422
    assert client.post("/api/v1/runs", json=make_run(run_id="x")).status_code == 401
    conflict = client.post("/api/v1/runs", json=make_run(workers=9), headers=ingest_headers)
    assert conflict.status_code == 409
    batch = {"runs": [make_run(run_id="b-1"), make_run(run_id="b-2"), make_run()]}
    response = client.post("/api/v1/runs/batch", json=batch, headers=ingest_headers)
    assert response.status_code == 201, response.text
    # The same batch again: three runs that exist, counted from the route's state (the
    # answer, a 200, is not parsed back).
    again = client.post("/api/v1/runs/batch", json=batch, headers=ingest_headers)
    assert again.status_code == 200, again.text
    samples = scrape(client)
    # created: 1 single + 2 of the batch; existing: the single retry, the batch's copy of
    # run-1, and the 3 of the repeated batch.
    assert value(samples, "cadence_runs_ingested_total", outcome="created") == 3
    assert value(samples, "cadence_runs_ingested_total", outcome="existing") == 5
    for reason in ("validation_error", "unauthorized", "conflict"):
        assert value(samples, "cadence_ingest_rejections_total", reason=reason) == 1, reason


def test_too_large_ingest_is_a_rejection(db: Database, settings: Settings) -> None:
    small = settings.model_copy(update={"max_body_bytes": 2048})
    with TestClient(create_app(small, database=db)) as c:
        big = {"runs": [make_run(run_id=f"r{i}") for i in range(20)]}
        assert c.post("/api/v1/runs/batch", json=big).status_code == 413
        samples = scrape(c)
    assert value(samples, "cadence_ingest_rejections_total", reason="payload_too_large") == 1


def test_business_gauges_match_the_api(
    client: TestClient, ingest_headers: dict[str, str], admin_headers: dict[str, str]
) -> None:
    # Three runs in the week before the last complete one, one in it, and one in the week
    # in progress (on a Monday morning a few hours ahead: accepted). /metrics reports the
    # last complete week, as the review does.
    for i, (day, workers) in enumerate([(-6, 8), (-5, 8), (-4, 16), (1, 8), (7, 8)]):
        run = make_run(run_id=f"g-{i}", workers=workers, **last_week_day(day))
        assert client.post("/api/v1/runs", json=run, headers=ingest_headers).status_code == 201
    put = client.put(
        "/api/v1/pipelines/ranker",
        json={"monthly_budget_usd": 12345.0, "runs_per_week": 3},
        headers=admin_headers,
    )
    assert put.status_code == 200, put.text
    projection = client.get("/api/v1/pipelines/ranker/projection?cadences=3").json()
    expected = projection["projections"][projection["current_variant"]]["cadences"][0]
    goodput = client.get("/api/v1/pipelines/ranker/goodput?weeks=8").json()
    samples = scrape(client)
    assert value(samples, "cadence_database_up") == 1
    got = value(samples, "cadence_pipeline_expected_bill_usd", pipeline="ranker")
    assert got == pytest.approx(expected["expected_bill_usd"])
    # The old name is kept one release, the same figure, its HELP saying it is deprecated.
    old = value(samples, "cadence_pipeline_projected_monthly_cost_usd", pipeline="ranker")
    assert old == got
    help_text = client.get("/metrics").text
    assert "# HELP cadence_pipeline_projected_monthly_cost_usd DEPRECATED" in help_text
    assert got != pytest.approx(
        client.get("/api/v1/pipelines/ranker/projection?cadences=1").json()["projections"][
            "baseline"
        ]["cadences"][0]["monthly_cost_usd"]
    )  # the pipeline's own cadence (3/week), not the default 1
    assert value(samples, "cadence_pipeline_monthly_budget_usd", pipeline="ranker") == 12345.0
    [last] = [w for w in goodput["weeks"] if w["week"] == demo_week()]
    weekly = value(samples, "cadence_pipeline_weekly_goodput", pipeline="ranker", week=demo_week())
    assert weekly == pytest.approx(last["goodput"]["overall"])


def test_above_the_limit_gauges_are_per_team(
    db: Database, settings: Settings, admin_headers: dict[str, str]
) -> None:
    limited = settings.model_copy(update={"metrics_pipeline_limit": 1})
    with TestClient(create_app(limited, database=db)) as c:
        for name, owner, budget in (("ta-1", "team-a", 100.0), ("ta-2", "team-a", 50.0),
                                    ("tb-1", "", 10.0)):  # fmt: skip
            body = {"owner": owner, "monthly_budget_usd": budget}
            assert c.put(f"/api/v1/pipelines/{name}", json=body, headers=admin_headers).is_success
        samples = scrape(c)
    # Three pipelines > 1: budgets summed per owner, and no per-pipeline series at all.
    assert value(samples, "cadence_pipelines") == 3
    assert value(samples, "cadence_team_monthly_budget_usd", team="team-a") == 150.0
    assert value(samples, "cadence_team_pipelines", team="team-a") == 2
    assert value(samples, "cadence_team_monthly_budget_usd", team="unassigned") == 10.0
    assert not [k for k in samples if k[0].startswith("cadence_pipeline_")]


@pytest.fixture
def down_database() -> Iterator[Database]:
    engine = create_engine(
        "postgresql+psycopg://nobody@127.0.0.1:1/none", connect_args={"connect_timeout": 2}
    )
    yield Database(engine)
    engine.dispose()


def test_scrape_survives_a_database_outage(settings: Settings, down_database: Database) -> None:
    with TestClient(create_app(settings, database=down_database)) as c:
        samples = scrape(c)
    assert value(samples, "cadence_database_up") == 0
    assert not any(name.startswith("cadence_pipeline_") for name, _ in samples)
    # The scrape itself is counted after its answer, so it is not in it yet.
    assert (
        value(samples, "cadence_http_requests_total", method="GET", route="/metrics", status="200")
        is None
    )


@pytest.mark.parametrize("read_access", ["open", "token"])
def test_token_protected_metrics(db: Database, settings: Settings, read_access: str) -> None:
    protected = settings.model_copy(
        update={"metrics_token_scope": "read", "read_access": read_access}
    )
    ingest = {"Authorization": f"Bearer {make_token(db, 'ingest')}"}
    read = {"Authorization": f"Bearer {make_token(db, 'read')}"}
    with TestClient(create_app(protected, database=db)) as c:
        missing = c.get("/metrics")
        assert missing.status_code == 401
        assert missing.json()["error"]["code"] == "unauthorized"
        assert c.get("/metrics", headers={"Authorization": "Bearer cad_nope"}).status_code == 401
        assert c.get("/metrics", headers=ingest).status_code == 403
        assert scrape(c, headers=read)


def test_token_mode_closes_metrics_unless_made_public(db: Database, settings: Settings) -> None:
    # In token mode /metrics names every pipeline and its cost: a read token, unless
    # CADENCE_METRICS_PUBLIC=true opens it for a Prometheus that has no token.
    token_mode = settings.model_copy(update={"read_access": "token"})
    read = {"Authorization": f"Bearer {make_token(db, 'read')}"}
    with TestClient(create_app(token_mode, database=db)) as c:
        assert c.get("/api/v1/pipelines").status_code == 401  # the gate is on
        assert c.get("/metrics").status_code == 401
        assert scrape(c, headers=read)
    public = token_mode.model_copy(update={"metrics_public": True})
    with TestClient(create_app(public, database=db)) as c:
        assert scrape(c)


def access_lines(err: str) -> list[dict[str, object]]:
    lines = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    return [line for line in lines if line.get("logger") == "cadence.access"]


def test_request_id_echoed_replaced_generated_and_logged(
    client: TestClient, capsys: pytest.CaptureFixture[str]
) -> None:
    capsys.readouterr()
    good = "req-42.abc_DEF"
    response = client.get("/api/v1/runs/55", headers={"X-Request-ID": good})
    assert response.headers["x-request-id"] == good
    hostile: list[str | bytes] = ["x" * 500, "abc def", "a;b", "ä".encode()]
    seen = set()
    for bad in hostile:
        rid = client.get("/healthz", headers={"X-Request-ID": bad}).headers["x-request-id"]
        assert re.fullmatch(r"[0-9a-f]{32}", rid), rid
        seen.add(rid)
    generated = [client.get("/healthz").headers["x-request-id"] for _ in range(2)]
    assert all(re.fullmatch(r"[0-9a-f]{32}", g) for g in generated)
    assert len(seen | set(generated)) == len(hostile) + 2
    lines = access_lines(capsys.readouterr().err)
    [line] = [x for x in lines if x["request_id"] == good]
    assert line["method"] == "GET"
    assert line["route"] == "/api/v1/runs/{pk}"
    assert line["path"] == "/api/v1/runs/55"
    assert line["status"] == 404
    assert isinstance(line["duration_ms"], float)
    assert line["level"] == "info"
    assert {"ts", "message"} <= set(line)


def test_newline_in_request_id_is_replaced() -> None:
    from app.observability.context import choose_request_id

    assert choose_request_id(b"ok-1") == "ok-1"
    for bad in (b"a\nb", b"a\r\nSet-Cookie: x", b"", b"\xff\xfe", b"y" * 65):
        assert re.fullmatch(r"[0-9a-f]{32}", choose_request_id(bad))


def test_log_records_carry_the_request_id(
    client: TestClient, capsys: pytest.CaptureFixture[str]
) -> None:
    """Any ``cadence.*`` record logged while a request id is set carries it."""
    import logging

    from app.observability.context import request_id_var

    capsys.readouterr()
    token = request_id_var.set("ctx-7")
    try:
        logging.getLogger("cadence.test").warning("inside %s", "request")
    finally:
        request_id_var.reset(token)
    # Our handler's JSON line (another test may have left a plain handler on the root).
    err = capsys.readouterr().err.splitlines()
    [line] = [json.loads(x) for x in err if "inside" in x and x.startswith("{")]
    assert line == {
        **line,
        "request_id": "ctx-7",
        "level": "warning",
        "logger": "cadence.test",
        "message": "inside request",
    }


def test_text_log_format(
    db: Database, settings: Settings, capsys: pytest.CaptureFixture[str]
) -> None:
    text = settings.model_copy(update={"log_format": "text"})
    try:
        with TestClient(create_app(text, database=db)) as c:
            capsys.readouterr()
            rid = c.get("/api/v1/pipelines", headers={"X-Request-ID": "txt-1"})
            assert rid.headers["x-request-id"] == "txt-1"
        err = capsys.readouterr().err
        assert "[txt-1] GET /api/v1/pipelines 200" in err
        assert not err.lstrip().startswith("{")
    finally:
        create_app(settings, database=db)  # back to JSON for the tests after this one


def test_team_gauges_sum_costs_and_average_goodput() -> None:
    from app.observability.business import by_team

    rows = [
        ("cost", "p1", "a", 100.0), ("goodput", "p1", "a", 0.5),
        ("cost", "p2", "a", 50.0), ("goodput", "p2", "a", 0.7), ("budget", "p3", "b", 9.0),
    ]  # fmt: skip
    # Team a: cost 100 + 50 = 150, goodput (0.5 + 0.7) / 2 = 0.6, two pipelines.
    got = by_team(rows)
    assert got["cost", "a"] == 150.0 and got["goodput", "a"] == pytest.approx(0.6)
    assert got["pipelines", "a"] == 2 and got["pipelines", "b"] == 1


def disconnect_mid_body(client: TestClient, headers: dict[str, str]) -> list[dict[str, Any]]:
    """POST a batch whose client hangs up after the first 100 of 10,000 promised bytes:
    the ASGI server then delivers ``http.disconnect`` to the body reader."""
    messages: list[dict[str, Any]] = [
        {"type": "http.request", "body": b'{"runs": [' + b" " * 90, "more_body": True},
        {"type": "http.disconnect"},
    ]
    sent: list[dict[str, Any]] = []
    raw_headers = [(k.lower().encode(), v.encode()) for k, v in headers.items()]
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/api/v1/runs/batch",
        "raw_path": b"/api/v1/runs/batch",
        "query_string": b"",
        "root_path": "",
        "headers": [
            *raw_headers,
            (b"content-type", b"application/json"),
            (b"content-length", b"10000"),
        ],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }

    async def receive() -> dict[str, Any]:
        return messages.pop(0) if messages else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    asyncio.run(client.app(scope, receive, send))  # type: ignore[arg-type]
    return sent


def test_a_client_that_hangs_up_mid_body_is_not_a_server_error(
    client: TestClient, ingest_headers: dict[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    """It was logged at ERROR with a traceback and counted as a 500 (300 in one test)."""
    with caplog.at_level(logging.INFO):
        sent = disconnect_mid_body(client, ingest_headers)
    assert sent[0]["status"] == 499
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert any("client disconnected" in r.getMessage() for r in caplog.records)
    samples = scrape(client)
    key = {"method": "POST", "route": "/api/v1/runs/batch"}
    assert value(samples, "cadence_http_requests_total", **key, status="499") == 1
    assert value(samples, "cadence_http_requests_total", **key, status="500") is None
    reason = value(samples, "cadence_ingest_rejections_total", reason="client_disconnected")
    assert reason == 1


def test_this_months_status_is_the_apis(
    client: TestClient, ingest_headers: dict[str, str], admin_headers: dict[str, str]
) -> None:
    """The month's spend, expected end and status word on /metrics are the projection
    API's month_to_date (one function: app.analytics.month)."""
    run = make_run(run_id="this-month", **this_month_run())
    assert client.post("/api/v1/runs", json=run, headers=ingest_headers).status_code == 201
    body = {"monthly_budget_usd": 100.0}  # the run cost 112 GPU-h x $2.50 = $280: over
    assert client.put("/api/v1/pipelines/ranker", json=body, headers=admin_headers).is_success
    mtd = client.get("/api/v1/pipelines/ranker/projection").json()["month_to_date"]
    assert mtd["status"] == "over" and mtd["spend_to_date_usd"] == pytest.approx(280.0)
    samples = scrape(client)
    assert value(samples, "cadence_pipeline_budget_status", pipeline="ranker", status="over") == 1
    spent = value(samples, "cadence_pipeline_month_to_date_usd", pipeline="ranker")
    assert spent == pytest.approx(mtd["spend_to_date_usd"])
    expected = value(samples, "cadence_pipeline_expected_end_of_month_usd", pipeline="ranker")
    assert expected == pytest.approx(mtd["expected_end_of_month_usd"])
