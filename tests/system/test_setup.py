"""Settings, docker-compose and the schema check at start-up."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from app.settings import PROJECT_ROOT, Settings, normalise_database_url


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("postgres://u:p@h:5432/d", "postgresql+psycopg://u:p@h:5432/d"),
        ("postgresql://u@h/d", "postgresql+psycopg://u@h/d"),
        ("postgresql+psycopg2://u@h/d", "postgresql+psycopg://u@h/d"),
        ("postgresql+psycopg://u@h/d", "postgresql+psycopg://u@h/d"),
        ("sqlite:///var/x.db", "sqlite:///var/x.db"),
    ],
)
def test_database_url_normalised(given: str, expected: str) -> None:
    assert normalise_database_url(given) == expected
    assert Settings(database_url=given).database_url == expected


def test_env_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CADENCE_DATABASE_URL", "postgres://a@b/c")
    monkeypatch.setenv("CADENCE_PORT", "9000")
    s = Settings()
    assert (s.database_url, s.port) == ("postgresql+psycopg://a@b/c", 9000)


def test_default_is_embedded_sqlite() -> None:
    assert Settings().database_url.endswith("/var/cadence.db")


def test_production_refuses_default_secret() -> None:
    with pytest.raises(ValidationError, match="CADENCE_SECRET_KEY"):
        Settings(environment="production")
    assert Settings(environment="production", secret_key="s3cret-" * 4).environment == "production"


def test_compose_environment_matches_settings() -> None:
    compose = yaml.safe_load((PROJECT_ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    assert services["db"]["image"].startswith("postgres:16")
    known = {f"CADENCE_{name.upper()}" for name in Settings.model_fields}
    for name in ("app", "migrate"):
        env = services[name]["environment"]
        unknown = set(env) - known
        assert not unknown, f"{name} sets variables Settings does not read: {unknown}"
        assert Settings(database_url=env["CADENCE_DATABASE_URL"]).database_url.startswith(
            "postgresql+psycopg://"
        )
    app = services["app"]
    assert app["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    assert app["depends_on"]["db"]["condition"] == "service_healthy"
    assert "readyz" in " ".join(app["healthcheck"]["test"])
    assert "healthcheck" in services["db"]
    # Several stateless replicas behind the load balancer, which alone publishes a port.
    assert app["deploy"]["replicas"] >= 2 and "ports" not in app
    lb = services["lb"]
    assert lb["ports"] == ["8000:8000"]
    assert lb["depends_on"]["app"]["condition"] == "service_healthy"
    nginx = (PROJECT_ROOT / "deploy" / "nginx.conf").read_text()
    assert "server app:8000" in nginx


def test_the_docs_list_every_setting() -> None:
    table = (PROJECT_ROOT / "docs" / "configuration.md").read_text()
    missing = [
        f"CADENCE_{name.upper()}"
        for name in Settings.model_fields
        if f"| `CADENCE_{name.upper()}` |" not in table
    ]
    assert not missing, f"docs/configuration.md's settings table lacks {missing}"


def test_ci_runs_make_test() -> None:
    ci = (PROJECT_ROOT / ".ci" / "run").read_text()
    assert "make test" in ci
    assert "CADENCE_REQUIRE_POSTGRES=1" in ci
    assert "CADENCE_REQUIRE_BROWSER=1" in ci


def test_dockerfile_ships_what_the_app_reads() -> None:
    dockerfile = (PROJECT_ROOT / "Dockerfile").read_text()
    for part in ("app", "migrations", "templates", "static", "alembic.ini"):
        assert f"COPY {part}" in dockerfile or part in dockerfile
    assert Path(PROJECT_ROOT / "migrations" / "env.py").exists()
