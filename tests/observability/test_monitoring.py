"""The Grafana dashboard and the compose `monitoring` profile: every metric the dashboard
queries is one /metrics exports, and the provisioning files fit together."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from app.db.engine import Database
from app.db.models import AlertDelivery, AlertRule, Pipeline
from app.settings import PROJECT_ROOT
from tests.fixtures.builders import demo_week, last_week_day, make_run

DEPLOY = PROJECT_ROOT / "deploy"
DASHBOARD = DEPLOY / "grafana" / "dashboards" / "cadence.json"
METRIC = re.compile(r"\b(cadence_[a-z0-9_]+)\b")


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return loaded


def queries(board: dict[str, Any]) -> list[str]:
    exprs = [t["expr"] for p in board["panels"] for t in p.get("targets", [])]
    for variable in board["templating"]["list"]:
        exprs.append(variable["query"]["query"])
    return exprs


def test_the_dashboard_has_the_panels_teams_asked_for() -> None:
    titles = [p["title"] for p in dashboard()["panels"]]
    for wanted in (
        "Spend vs budget",
        "Goodput by week",
        "Badput by cause",
        "Ingest rate and errors",
        "Alert deliveries",
    ):
        assert any(t.startswith(wanted) for t in titles), (wanted, titles)
    uids = {p["datasource"]["uid"] for p in dashboard()["panels"]}
    datasources = yaml.safe_load(
        (DEPLOY / "grafana" / "provisioning" / "datasources" / "prometheus.yml").read_text()
    )
    assert uids == {datasources["datasources"][0]["uid"]}


def test_every_metric_the_dashboard_queries_is_exported(
    client: TestClient,
    db: Database,
    ingest_headers: dict[str, str],
    admin_headers: dict[str, str],
) -> None:
    for i in range(3):  # in the last complete week, the one /metrics reports
        run = make_run(run_id=f"m-{i}", **last_week_day(i))
        assert client.post("/api/v1/runs", json=run, headers=ingest_headers).status_code == 201
    bad = client.post("/api/v1/runs", json=make_run(run_id="m-bad", workers=0))
    assert bad.status_code == 401  # a rejection, so the rejection counter has a sample
    put = client.put(
        "/api/v1/pipelines/ranker", json={"monthly_budget_usd": 5000.0}, headers=admin_headers
    )
    assert put.status_code == 200
    with db.write() as s:
        pipeline = s.query(Pipeline).filter_by(name="ranker").one()
        rule = AlertRule(
            pipeline_id=pipeline.id, kind="cost_over_budget", threshold=100.0,
            webhook_url="http://hooks.test/x",
        )  # fmt: skip
        s.add(rule)
        s.flush()
        s.add(AlertDelivery(rule_id=rule.id, event="firing", payload={}, status="failed",
                            attempts=3, scheduled_at=datetime.now(UTC)))  # fmt: skip
    text = client.get("/metrics").text
    exported: dict[str, dict[frozenset[tuple[str, str]], float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            exported.setdefault(sample.name, {})[frozenset(sample.labels.items())] = sample.value
    used = {m for expr in queries(dashboard()) for m in METRIC.findall(expr)}
    assert len(used) >= 8
    missing = sorted(used - set(exported))
    assert not missing, f"the dashboard queries metrics /metrics does not export: {missing}"
    # The two series added for the dashboard carry what it plots.
    deliveries = exported["cadence_alert_deliveries_total"]
    assert deliveries[frozenset({("status", "failed")})] == 1
    assert deliveries[frozenset({("status", "delivered")})] == 0
    # One run of the worked example per day in one week: data stall 5 h x 8 workers x 3.
    badput = exported["cadence_pipeline_weekly_badput_gpu_seconds"]
    labels = {("pipeline", "ranker"), ("cause", "data_stall"), ("week", demo_week())}
    assert badput[frozenset(labels)] == pytest.approx(120 * 3600)  # GPU-seconds


def test_the_compose_monitoring_profile_is_provisioned() -> None:
    compose = yaml.safe_load((PROJECT_ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    for name in ("prometheus", "grafana"):
        assert services[name]["profiles"] == ["monitoring"], name
    for name in ("db", "migrate", "app", "lb"):
        assert "profiles" not in services[name]  # the default stack is unchanged
    mounts = {
        volume.split(":")[1]: volume.split(":")[0]
        for name in ("prometheus", "grafana")
        for volume in services[name]["volumes"]
        if volume.startswith("./")
    }
    for source in mounts.values():
        assert (PROJECT_ROOT / source).exists(), source
    assert mounts["/etc/grafana/provisioning"] == "./deploy/grafana/provisioning"
    provider = yaml.safe_load(
        (DEPLOY / "grafana" / "provisioning" / "dashboards" / "cadence.yml").read_text()
    )
    assert mounts[provider["providers"][0]["options"]["path"]] == "./deploy/grafana/dashboards"
    prometheus = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    [job] = prometheus["scrape_configs"]
    assert job["metrics_path"] == "/metrics"
    assert job["dns_sd_configs"][0] == {"names": ["app"], "type": "A", "port": 8000}
    datasource = yaml.safe_load(
        (DEPLOY / "grafana" / "provisioning" / "datasources" / "prometheus.yml").read_text()
    )
    assert datasource["datasources"][0]["url"] == "http://prometheus:9090"
