"""A token's ``--pipeline`` limit binds every scope on every endpoint and page.

Token read mode, two pipelines (alpha, beta) with one run each; tokens limited to alpha.
Outside the limit: 403 decided on the name alone (the same for a pipeline that does not
exist, so nothing leaks), 404 for a run looked up by id, and lists leave it out.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.db.engine import Database
from app.main import create_app
from app.settings import Settings
from tests.fixtures.builders import make_run, make_token
from tests.fixtures.security import HTML, SECRET, bearer, sign_in

RULE = {"kind": "cost_over_budget", "threshold": 100, "webhook_url": "https://x.test/h"}
# Every read route that names a pipeline: pipelines, planning, alerts, runs, pages.
PIPELINE_READS = [
    "/api/v1/pipelines/{p}",
    "/api/v1/pipelines/{p}/projection",
    "/api/v1/pipelines/{p}/goodput",
    "/api/v1/pipelines/{p}/gate?budget=1000",
    "/api/v1/pipelines/{p}/scaling",
    "/api/v1/pipelines/{p}/levers",
    "/api/v1/pipelines/{p}/checkpoints",
    "/api/v1/pipelines/{p}/evaluations",
    "/api/v1/pipelines/{p}/alerts",
    "/api/v1/pipelines/{p}/alerts/deliveries",
    "/api/v1/pipelines/{p}/reconciliation",
    "/api/v1/runs?pipeline={p}",
    "/pipelines/{p}",
    "/pipelines/{p}/whatif",
    "/pipelines/{p}/runs.csv",
]
# Every admin write that names a pipeline (method, path, JSON body).
PIPELINE_WRITES = [
    ("PUT", "/api/v1/pipelines/{p}", {"monthly_budget_usd": 1}),
    ("POST", "/api/v1/pipelines/{p}/alerts", RULE),
    ("DELETE", "/api/v1/pipelines/{p}/alerts/1", None),
    ("POST", "/api/v1/pipelines/{p}/alerts/evaluate", None),
]


class World:
    def __init__(self, client: TestClient, db: Database) -> None:
        self.client = client
        admin = make_token(db, "admin", name="root")
        ingest = make_token(db, "ingest", name="loader")
        self.read_alpha = bearer(make_token(db, "read", name="read-alpha", pipelines=["alpha"]))
        self.admin_alpha = bearer(make_token(db, "admin", name="admin-alpha", pipelines=["alpha"]))
        self.admin = bearer(admin)
        self.pk: dict[str, int] = {}
        for name in ("alpha", "beta"):
            runs = [make_run(pipeline=name, run_id=f"{name}-2", variant="candidate")]
            runs.append(make_run(pipeline=name, run_id=f"{name}-1"))
            for run in runs:
                r = client.post("/api/v1/runs", json=run, headers=bearer(ingest))
                assert r.status_code == 201, r.text
            self.pk[name] = r.json()["id"]

    def call(self, method: str, path: str, headers: dict[str, str], body: Any = None) -> Any:
        return self.client.request(method, path, headers=headers, json=body)


@pytest.fixture
def world(db: Database, database_url: str) -> Iterator[World]:
    settings = Settings(
        database_url=database_url,
        read_access="token",
        secret_key=SECRET,
        metrics_token_scope="read",
    )
    with TestClient(create_app(settings, database=db), follow_redirects=False) as c:
        yield World(c, db)


@pytest.mark.parametrize("route", PIPELINE_READS)
def test_reads_of_another_pipeline_are_forbidden_without_revealing_it(
    world: World, route: str
) -> None:
    for headers in (world.read_alpha, world.admin_alpha):
        assert world.call("GET", route.format(p="alpha"), headers).status_code == 200
        beta = world.call("GET", route.format(p="beta"), headers)
        assert beta.status_code == 403, beta.text
        assert "limited to pipeline(s) alpha" in beta.json()["error"]["message"]
        # A pipeline that does not exist gets the same answer: existence does not leak.
        gamma = world.call("GET", route.format(p="gamma"), headers)
        assert gamma.status_code == 403
        assert gamma.json()["error"]["message"] == beta.json()["error"]["message"].replace(
            "'beta'", "'gamma'"
        )
    # An unlimited token still reads beta.
    assert world.call("GET", route.format(p="beta"), world.admin).status_code == 200


@pytest.mark.parametrize(("method", "route", "body"), PIPELINE_WRITES)
def test_admin_writes_to_another_pipeline_are_forbidden(
    world: World, method: str, route: str, body: Any
) -> None:
    r = world.call(method, route.format(p="beta"), world.admin_alpha, body)
    assert r.status_code == 403, r.text
    # Nothing changed: beta has no budget and no rules.
    beta = world.call("GET", "/api/v1/pipelines/beta", world.admin).json()
    assert beta["monthly_budget_usd"] is None
    assert world.call("GET", "/api/v1/pipelines/beta/alerts", world.admin).json()["rules"] == []


def test_admin_limited_to_alpha_still_manages_alpha(world: World) -> None:
    r = world.call("PUT", "/api/v1/pipelines/alpha", world.admin_alpha, {"monthly_budget_usd": 9})
    assert r.status_code == 200 and r.json()["monthly_budget_usd"] == 9
    r = world.call("POST", "/api/v1/pipelines/alpha/alerts", world.admin_alpha, RULE)
    assert r.status_code == 201, r.text
    rule = r.json()["id"]
    r = world.call("DELETE", f"/api/v1/pipelines/alpha/alerts/{rule}", world.admin_alpha)
    assert r.status_code == 204
    # A new pipeline inside the limit may be created; one outside may not.
    assert world.call("PUT", "/api/v1/pipelines/gamma", world.admin_alpha, {}).status_code == 403
    assert world.call("GET", "/api/v1/pipelines/gamma", world.admin).status_code == 404


def test_runs_by_id_outside_the_limit_are_not_found(world: World) -> None:
    beta, alpha = world.pk["beta"], world.pk["alpha"]
    for headers in (world.read_alpha, world.admin_alpha):
        assert world.call("GET", f"/api/v1/runs/{alpha}", headers).status_code == 200
        r = world.call("GET", f"/api/v1/runs/{beta}", headers)
        assert r.status_code == 404
        assert r.json()["error"]["message"] == f"no run with id {beta}"  # as if it did not exist
    r = world.call("DELETE", f"/api/v1/runs/{beta}", world.admin_alpha)
    assert r.status_code == 404
    assert world.call("GET", f"/api/v1/runs/{beta}", world.admin).status_code == 200  # kept
    assert world.call("DELETE", f"/api/v1/runs/{alpha}", world.admin_alpha).status_code == 204


@pytest.mark.parametrize("who", ["read_alpha", "admin_alpha"])
def test_lists_and_exports_show_only_allowed_pipelines(world: World, who: str) -> None:
    headers = getattr(world, who)
    names = [p["name"] for p in world.call("GET", "/api/v1/pipelines", headers).json()["pipelines"]]
    assert names == ["alpha"]
    runs = world.call("GET", "/api/v1/runs", headers).json()["runs"]  # what `cadence export` reads
    assert [r["pipeline"] for r in runs] == ["alpha", "alpha"]
    everything = world.call("GET", "/api/v1/pipelines", world.admin).json()["pipelines"]
    assert [p["name"] for p in everything] == ["alpha", "beta"]


@pytest.mark.parametrize("page", ["/", "/review?week=2026-W45"])
def test_overview_and_review_show_only_allowed_pipelines(world: World, page: str) -> None:
    for headers in (world.read_alpha, {**world.admin, **HTML}):
        r = world.call("GET", page, {**headers, **HTML})
        assert r.status_code == 200
        assert "/pipelines/alpha" in r.text
        assert ("/pipelines/beta" in r.text) == (headers is not world.read_alpha)


def test_a_browser_session_carries_the_limit(world: World, db: Database) -> None:
    secret = make_token(db, "read", name="browser-alpha", pipelines=["alpha"])
    assert sign_in(world.client, secret).status_code == 303
    overview = world.client.get("/", headers=HTML)
    assert "/pipelines/alpha" in overview.text and "/pipelines/beta" not in overview.text
    assert world.client.get("/pipelines/alpha", headers=HTML).status_code == 200
    page = world.client.get("/pipelines/beta", headers=HTML)
    assert page.status_code == 403 and "limited to pipeline(s) alpha" in page.text


def test_metrics_show_only_allowed_pipelines(world: World) -> None:
    for name in ("alpha", "beta"):
        body = {"monthly_budget_usd": 100}
        assert world.call("PUT", f"/api/v1/pipelines/{name}", world.admin, body).status_code == 200
    limited = world.call("GET", "/metrics", world.read_alpha).text
    assert 'cadence_pipeline_monthly_budget_usd{pipeline="alpha"} 100.0' in limited
    assert 'pipeline="beta"' not in limited
    assert "cadence_http_requests_total" in limited  # unlabelled-by-pipeline metrics stay
    full = world.call("GET", "/metrics", world.admin).text
    assert 'cadence_pipeline_monthly_budget_usd{pipeline="beta"} 100.0' in full


def test_evaluations_and_cadence_are_bound_by_the_limit(world: World, db: Database) -> None:
    ingest_alpha = bearer(make_token(db, "ingest", name="ingest-alpha", pipelines=["alpha"]))
    body = {
        "evaluations": [{"run_id": "beta-1", "evaluated_at": "2026-11-03T00:00:00Z", "value": 1}]
    }
    r = world.call("POST", "/api/v1/pipelines/beta/evaluations", ingest_alpha, body)
    assert r.status_code == 403
    for p, status in (("alpha", 422), ("beta", 403)):  # alpha: no quality value set yet
        assert (
            world.call("GET", f"/api/v1/pipelines/{p}/cadence", world.read_alpha).status_code
            == status
        )
