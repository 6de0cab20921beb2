"""One typed settings class for the whole service (env prefix ``CADENCE_``)."""

from __future__ import annotations

import sys
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from app.planning.budget_status import StatusThresholds


def project_root() -> Path:
    """Where templates/, static/, migrations/ and alembic.ini are: beside app/ in a
    checkout or an editable install; ``<prefix>/share/cadence`` after ``pip install .``,
    which puts them there (``[tool.setuptools.data-files]`` in pyproject.toml)."""
    source = Path(__file__).resolve().parent.parent
    installed = Path(sys.prefix) / "share" / "cadence"
    if not (source / "migrations").is_dir() and (installed / "migrations").is_dir():
        return installed
    return source


PROJECT_ROOT = project_root()
DEFAULT_SQLITE_URL = f"sqlite:///{PROJECT_ROOT / 'var' / 'cadence.db'}"
DEFAULT_SECRET = "change-me"


def normalise_database_url(url: str) -> str:
    """Accept the URL spellings hosting providers hand out and pick our drivers.

    ``postgres://`` and ``postgresql://`` (and ``postgresql+psycopg2://``) become
    ``postgresql+psycopg://`` (psycopg 3, the only PostgreSQL driver we install).
    SQLite URLs pass through unchanged.
    """
    url = url.strip()
    for prefix in ("postgres://", "postgresql://", "postgresql+psycopg2://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CADENCE_", extra="ignore")

    environment: Literal["development", "production"] = Field(
        "development", description="`production` refuses a default secret."
    )
    database_url: str = Field(DEFAULT_SQLITE_URL, description="SQLAlchemy URL of the database.")
    read_database_url: str | None = Field(
        None, description="Optional read replica for dashboards and analytics (read-only work)."
    )
    db_prepared_statements: bool = Field(
        True, description="Server-side prepared statements; turn off behind PgBouncer < 1.21."
    )
    host: str = Field("127.0.0.1", description="Address `cadence serve` binds to.")
    port: int = Field(8000, ge=1, le=65535, description="Port `cadence serve` listens on.")
    workers: int = Field(1, ge=1, le=64, description="uvicorn worker processes.")
    log_level: Literal["debug", "info", "warning", "error"] = Field(
        "info", description="Log level of the service."
    )
    secret_key: str = Field(DEFAULT_SECRET, description="Secret for signed values.")
    db_pool_size: int = Field(10, ge=1, le=200, description="Connections kept per process.")
    db_max_overflow: int = Field(10, ge=0, le=200, description="Extra connections under load.")
    max_body_bytes: int = Field(1_048_576, ge=1024, description="Largest accepted request body.")
    max_batch_runs: int = Field(1000, ge=1, le=10_000, description="Runs per batch POST.")
    default_price_per_gpu_hour: float = Field(
        2.5,
        ge=0.001,
        le=10_000,
        description="Price for pipelines created implicitly by ingestion (USD per GPU-hour).",
    )
    read_access: Literal["open", "token"] = Field(
        "open",
        description="open: anyone who reaches the service may read; token: API reads need a "
        "`read` token and the browser signs in with one.",
    )
    session_hours: float = Field(12.0, gt=0, le=24 * 30, description="Browser session lifetime.")
    db_statement_timeout_ms: int = Field(
        15_000, ge=0, le=3_600_000, description="PostgreSQL statement_timeout (0: none)."
    )
    token_cache_seconds: float = Field(
        5.0, ge=0, le=300, description="How long a verified token is trusted without a look-up."
    )
    auto_create_pipelines: bool = Field(
        True,
        description="Ingesting a run of an unknown pipeline creates it; false: a 422 until an "
        "admin creates it with PUT /api/v1/pipelines/{name}.",
    )
    pipeline_create_per_hour: int = Field(
        100,
        ge=0,
        le=1_000_000,
        description="Pipelines one API token may create per hour (ingest or PUT); 0: no limit.",
    )
    demo_on_empty: bool = Field(
        True,
        description="`cadence demo --if-empty` (run by `make run`) loads demo data into an "
        "empty DB; false: it loads nothing.",
    )
    header_timeout_seconds: float = Field(
        10.0,
        gt=0,
        le=300,
        description="A connection's request headers must arrive within this (from the "
        "connection or the request's first byte): else 408 and closed (slowloris).",
    )
    body_timeout_seconds: float = Field(
        60.0,
        gt=0,
        le=3600,
        description="A request body must arrive within this after its headers, however "
        "it trickles: else the connection is closed.",
    )
    keep_alive_seconds: float = Field(
        5.0, gt=0, le=300, description="An idle kept-alive connection is closed after this."
    )
    log_format: Literal["json", "text"] = Field(
        "json", description="Logs on stderr: one JSON object per line, or text for humans."
    )
    metrics_token_scope: Literal["", "read", "ingest", "admin"] = Field(
        "",
        description="Scope a bearer token needs for /metrics (empty: open, or `read` when "
        "read_access is token and metrics_public is false).",
    )
    metrics_public: bool = Field(
        False,
        description="With read_access=token, leave /metrics open (a Prometheus without a "
        "token); /metrics then shows every pipeline's name and cost to whoever reaches it.",
    )
    login_failures_per_minute: int = Field(
        10,
        ge=1,
        le=10_000,
        description="Wrong tokens one client may send to POST /login in a minute; then 429 "
        "with Retry-After until the oldest leaves the minute.",
    )
    alert_tests_per_minute: int = Field(
        3, ge=1, le=1000, description="Test sends of one alert rule a minute; then 429."
    )
    metrics_pipeline_limit: int = Field(
        1000,
        ge=0,
        description="Above this many pipelines /metrics exports per-team (owner) gauges "
        "instead of per-pipeline ones, so a scrape stays small (0: always per team).",
    )

    run_future_tolerance_hours: float = Field(
        24.0,
        ge=0,
        le=1e7,  # about 1,100 years: "no limit" for data dated on purpose (simulations)
        description="A run may start at most this many hours after the server's clock "
        "(clock skew); later starts are refused with a 422 naming started_at.",
    )

    status_likely_over: float = Field(
        0.5,
        gt=0,
        le=1,
        description="A budgeted month whose P(end-of-month bill > budget) is at least this "
        "reads likely_over (and fires budget_likely_over alerts).",
    )
    risk_tolerance: float = Field(
        0.1,
        gt=0,
        le=1,
        validation_alias=AliasChoices(
            "risk_tolerance", "CADENCE_RISK_TOLERANCE", "status_at_risk", "CADENCE_STATUS_AT_RISK"
        ),
        description="CADENCE_RISK_TOLERANCE: the one test behind every budget word. A plan "
        "fits (within) while P(bill > budget) is below it; from it a month reads at_risk. "
        "At most CADENCE_STATUS_LIKELY_OVER. CADENCE_STATUS_AT_RISK is its old name, still "
        "read.",
    )

    alert_webhook_timeout_seconds: float = Field(
        5.0, gt=0, le=60, description="Timeout of one alert webhook POST (connect and read)."
    )
    alert_retry_base_seconds: float = Field(
        30.0,
        gt=0,
        le=3600,
        description="First retry delay of a failed alert webhook; doubles each time, for up "
        "to 24 h.",
    )
    alert_min_interval_seconds: float = Field(
        600.0,
        ge=0,
        le=86_400,
        description="At most one alert webhook per rule per this many seconds; a rule that "
        "flaps meanwhile sends its latest state.",
    )
    alert_sender: bool = Field(
        True,
        description="Send queued alert webhooks from this process and evaluate rules left "
        "unjudged (two background threads).",
    )
    warm_start: bool = Field(
        True,
        description="At start, make the overview's and the review's org-wide reads once in "
        "a background thread, so the first reader of a new worker does not wait for them "
        "(readiness is not delayed).",
    )
    kept_snapshot_minutes: float = Field(
        10.0,
        ge=0,
        le=1440,
        description="With the warm start: write what a worker keeps to the database after "
        "its warm start and every this many minutes, and read it back when a worker of the "
        "same code starts, before it serves (0: neither).",
    )
    alert_max_in_flight: int = Field(
        4, ge=1, le=64, description="Alert webhooks one process sends at the same time."
    )
    alert_sweep_seconds: float = Field(
        10.0,
        gt=0,
        le=3600,
        description="How often each serving process looks for alert rules whose pipeline has "
        "runs their last evaluation did not see (also once at start-up), and evaluates them.",
    )
    alert_reevaluate_seconds: float = Field(
        3600.0,
        gt=0,
        le=7 * 86_400,
        description="A rule not evaluated for this long is evaluated again even without new "
        "runs (a month or week that turned, a budget that changed).",
    )
    webhook_allowed_hosts: str = Field(
        "",
        description="host[:port] list (comma-separated) that webhooks may reach although "
        "loopback, private or link-local (refused otherwise).",
    )
    public_url: str = Field(
        "",
        pattern=r"^(https?://[^\s/?#]+(/[^\s?#]*)?)?$",
        description="Where people reach this server, e.g. https://cadence.example.com: "
        "alert webhooks link to its pages with absolute URLs (relative when empty).",
    )

    @field_validator("database_url", "read_database_url")
    @classmethod
    def _normalise_url(cls, value: str | None) -> str | None:
        return normalise_database_url(value) if value else None

    @model_validator(mode="after")
    def _refuse_default_secret_in_production(self) -> Settings:
        if self.environment == "production" and self.secret_key in ("", DEFAULT_SECRET):
            raise ValueError(
                "CADENCE_SECRET_KEY must be set to a random value when "
                "CADENCE_ENVIRONMENT=production"
            )
        return self

    @model_validator(mode="after")
    def _refuse_inverted_status_thresholds(self) -> Settings:
        if self.risk_tolerance > self.status_likely_over:
            raise ValueError(
                f"CADENCE_RISK_TOLERANCE / CADENCE_STATUS_AT_RISK ({self.risk_tolerance:g}) "
                "must not be above "
                f"CADENCE_STATUS_LIKELY_OVER ({self.status_likely_over:g}): a month at "
                "risk is less likely over budget than one likely over"
            )
        return self

    @property
    def status_thresholds(self) -> StatusThresholds:
        """The budget status words' thresholds (app/planning/month_to_date.py)."""
        return StatusThresholds(likely_over=self.status_likely_over, at_risk=self.risk_tolerance)

    @property
    def status_at_risk(self) -> float:
        """The risk tolerance under its old name (CADENCE_STATUS_AT_RISK)."""
        return self.risk_tolerance

    @property
    def webhook_allowed(self) -> frozenset[str]:
        return frozenset(
            h.strip().lower() for h in self.webhook_allowed_hosts.split(",") if h.strip()
        )

    @property
    def is_sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")


@lru_cache
def get_settings() -> Settings:
    return Settings()
