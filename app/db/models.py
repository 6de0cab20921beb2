"""All ORM models, in one module so Alembic's autogenerate sees every table."""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    Date,
    Double,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column, relationship

from app.db.base import Base, BigIntPK, CreatedAt, UTCDateTime
from app.planning.rollup import SUMS as ROLLUP_SUMS


class Pipeline(CreatedAt, Base):
    __tablename__ = "pipeline"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(63), unique=True)
    display_name: Mapped[str] = mapped_column(String(200))
    owner: Mapped[str] = mapped_column(String(200), default="")
    price_per_gpu_hour: Mapped[float] = mapped_column(Double)
    monthly_budget_usd: Mapped[float | None] = mapped_column(Double, nullable=True)
    runs_per_week: Mapped[float] = mapped_column(Double, default=1.0)
    quality_metric: Mapped[str] = mapped_column(String(100), default="quality")
    higher_is_better: Mapped[bool] = mapped_column(Boolean, default=True)
    # The variant in production: "monthly cost at the current cadence" comes from it.
    production_variant: Mapped[str] = mapped_column(
        String(64), default="baseline", server_default="baseline"
    )
    # The bill's figure every budget verdict reads (app/planning/cost_basis.py).
    gate_cost_basis: Mapped[str] = mapped_column(String(16), default="p90", server_default="p90")
    # Power "runs still needed" is computed for.
    gate_power: Mapped[float] = mapped_column(Double, default=0.8, server_default="0.8")
    # What one unit of the quality metric is worth, USD per month (methodology.md §11); unset:
    # the cost-optimal cadence cannot be computed.
    quality_value_usd_per_unit_month: Mapped[float | None] = mapped_column(Double, nullable=True)
    # What each variant is ({"candidate": "sharded input + async checkpoints"}), shown
    # wherever a variant is named; null on rows older than the setting (read as none).
    variant_descriptions: Mapped[dict[str, str] | None] = mapped_column(JSON, nullable=True)
    # The gate's non-inferiority margin, in the quality metric's units: the candidate's
    # quality may be at most this much worse than the baseline's.
    quality_margin: Mapped[float] = mapped_column(Double, default=0.01, server_default="0.01")
    # The API token whose ingest or PUT created it (null: the CLI, the demo, older rows),
    # for the per-token creation limit. Not a foreign key: tokens are revoked, never
    # deleted, and the count only needs the id.
    created_by_token_id: Mapped[int | None] = mapped_column(Integer, nullable=True)

    __table_args__ = (
        CheckConstraint("price_per_gpu_hour >= 0", name="price_non_negative"),
        CheckConstraint("gate_cost_basis IN ('expected_bill','p90')", name="gate_cost_basis_known"),
        CheckConstraint("gate_power > 0 AND gate_power < 1", name="gate_power_fraction"),
        CheckConstraint("runs_per_week > 0", name="cadence_positive"),
        CheckConstraint("quality_margin >= 0", name="quality_margin_non_negative"),
        Index("ix_pipeline_creator_created", "created_by_token_id", "created_at"),
    )


class Run(CreatedAt, Base):
    __tablename__ = "run"

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True, autoincrement=True)
    pipeline_id: Mapped[int] = mapped_column(ForeignKey("pipeline.id", ondelete="CASCADE"))
    run_id: Mapped[str] = mapped_column(String(200))
    variant: Mapped[str] = mapped_column(String(64), default="baseline")
    started_at: Mapped[datetime] = mapped_column(UTCDateTime)
    # None while the attempt is running (outcome "running"): it is reported at its start
    # and completed later under the same run_id; no rollup counts it until then.
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    workers: Mapped[int] = mapped_column(Integer)
    gpu_type: Mapped[str] = mapped_column(String(64), default="")
    gpu_hours: Mapped[float] = mapped_column(Double)
    # None: not measured (a crash); counts in spend, never in utilization (rollup.terms).
    gpu_utilization: Mapped[float | None] = mapped_column(Double, nullable=True)
    # An attempt's outcome (app.runs.schemas.OUTCOMES) and the scheduled retraining it
    # belongs to (default: its own run_id): a retraining costs the sum of its attempts.
    outcome: Mapped[str] = mapped_column(String(16), default="succeeded")
    retraining_id: Mapped[str] = mapped_column(String(200))
    # One of app.runs.schemas.UTILIZATION_SOURCES (checked by the API), or unknown.
    utilization_source: Mapped[str | None] = mapped_column(String(32), nullable=True)
    price_per_gpu_hour: Mapped[float | None] = mapped_column(Double, nullable=True)
    # The price in force when the run was stored (its own, else the pipeline's then):
    # recorded spend uses it, so a later pipeline price change never rewrites history.
    billed_price_per_gpu_hour: Mapped[float] = mapped_column(Double)
    quality_metric: Mapped[str | None] = mapped_column(String(100), nullable=True)
    quality_value: Mapped[float | None] = mapped_column(Double, nullable=True)
    data_stall_hours: Mapped[float] = mapped_column(Double, default=0.0)
    checkpoint_hours: Mapped[float] = mapped_column(Double, default=0.0)
    scheduling_wait_hours: Mapped[float] = mapped_column(Double, default=0.0)
    mfu: Mapped[float | None] = mapped_column(Double, nullable=True)
    tags: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    # Sums over the run's interruptions, kept on the run so that weekly goodput
    # is one GROUP BY over one table (see app/planning/goodput.py).
    interruption_count: Mapped[int] = mapped_column(Integer, default=0)
    lost_progress_hours: Mapped[float] = mapped_column(Double, default=0.0)
    resume_hours: Mapped[float] = mapped_column(Double, default=0.0)
    reschedule_hours: Mapped[float] = mapped_column(Double, default=0.0)
    # Progress (hours of wall clock) this attempt resumed from a checkpoint an earlier
    # attempt of its retraining saved: not badput of that attempt (planning.rollup.terms).
    resumed_from_hours: Mapped[float] = mapped_column(Double, default=0.0)

    pipeline: Mapped[Pipeline] = relationship(lazy="raise")
    interruptions: Mapped[list[Interruption]] = relationship(
        back_populates="run",
        cascade="all, delete-orphan",
        passive_deletes=True,
        order_by="Interruption.position",
        lazy="raise",
    )

    __table_args__ = (
        UniqueConstraint("pipeline_id", "run_id"),
        Index("ix_run_pipeline_started", "pipeline_id", "started_at"),
        Index("ix_run_pipeline_variant_started", "pipeline_id", "variant", "started_at"),
        Index("ix_run_started", "started_at"),
        CheckConstraint("finished_at > started_at", name="finished_after_started"),
        CheckConstraint("workers >= 1", name="workers_positive"),
        CheckConstraint(
            "gpu_utilization >= 0 AND gpu_utilization <= 1", name="utilization_fraction"
        ),
        CheckConstraint(
            "outcome IN ('succeeded', 'failed', 'preempted', 'cancelled', 'running')",
            name="outcome_known",
        ),
        CheckConstraint(
            "(outcome = 'running' AND finished_at IS NULL) "
            "OR (outcome <> 'running' AND finished_at IS NOT NULL)",
            name="running_unfinished",
        ),
        Index(
            "ix_run_running",
            "pipeline_id",
            postgresql_where=text("finished_at IS NULL"),
            sqlite_where=text("finished_at IS NULL"),
        ),
        Index("ix_run_pipeline_retraining", "pipeline_id", "retraining_id"),
    )

    @property
    def wall_clock_hours(self) -> float:
        if self.finished_at is None:  # running: nothing has finished to measure
            return 0.0
        return (self.finished_at - self.started_at).total_seconds() / 3600.0


class RunRollup(Base):
    """Sums over the runs of one (pipeline, variant, ISO week, month), kept by ingest and
    delete in the same transaction (app/db/rollup.py; the terms are in app/planning/rollup.py).

    A week that spans two months has two rows, so weeks and months are both exact sums.
    """

    __tablename__ = "run_rollup"

    pipeline_id: Mapped[int] = mapped_column(
        ForeignKey("pipeline.id", ondelete="CASCADE"), primary_key=True
    )
    variant: Mapped[str] = mapped_column(String(64), primary_key=True)
    week_start: Mapped[date] = mapped_column(Date, primary_key=True)
    month_start: Mapped[date] = mapped_column(Date, primary_key=True)
    runs: Mapped[int] = mapped_column(Integer)
    # One Double column per name in app.planning.rollup.SUMS (added below).

    __table_args__ = (
        Index("ix_run_rollup_week", "week_start"),
        # A pipeline's latest week and run count read from the index alone (PostgreSQL).
        Index(
            "ix_run_rollup_pipeline_week",
            "pipeline_id",
            "week_start",
            postgresql_include=["runs"],
        ),
    )


for _name in ROLLUP_SUMS:
    setattr(RunRollup, _name, mapped_column(_name, Double, default=0.0, nullable=False))


class RunVariant(Base):
    """Per (pipeline, variant): its run count, its newest start, and ``changes``, a counter
    that every insert or delete of one of its runs increases, in the same transaction as
    ``run_rollup``.

    Something computed from a variant's runs (the median cost per run the portfolio, the
    review and /metrics show) can be kept between requests and trusted while ``changes``
    is the same (app/analytics/costs.py). A row stays when its last run is deleted, so the
    counter never starts again from a value a reader has seen.
    """

    __tablename__ = "run_variant"

    pipeline_id: Mapped[int] = mapped_column(
        ForeignKey("pipeline.id", ondelete="CASCADE"), primary_key=True
    )
    variant: Mapped[str] = mapped_column(String(64), primary_key=True)
    runs: Mapped[int] = mapped_column(Integer)
    changes: Mapped[int] = mapped_column(BigInteger)
    # The newest start among its runs (None when none is left): a pipeline's "last run"
    # on the pipeline list without probing the run table once per pipeline.
    last_started_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


class Interruption(Base):
    __tablename__ = "interruption"

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True, autoincrement=True)
    run_pk: Mapped[int] = mapped_column(ForeignKey("run.id", ondelete="CASCADE"), index=True)
    position: Mapped[int] = mapped_column(Integer, default=0)
    lost_progress_hours: Mapped[float] = mapped_column(Double, default=0.0)
    resume_hours: Mapped[float] = mapped_column(Double, default=0.0)
    reschedule_hours: Mapped[float] = mapped_column(Double, default=0.0)
    cause: Mapped[str | None] = mapped_column(String(200), nullable=True)

    run: Mapped[Run] = relationship(back_populates="interruptions", lazy="raise")


class Evaluation(CreatedAt, Base):
    """The serving model's quality at one moment: the model is run ``run_pk``, its age
    ``evaluated_at`` - that run's ``finished_at`` (app/evaluations, methodology.md §11)."""

    __tablename__ = "evaluation"

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True, autoincrement=True)
    pipeline_id: Mapped[int] = mapped_column(ForeignKey("pipeline.id", ondelete="CASCADE"))
    run_pk: Mapped[int] = mapped_column(ForeignKey("run.id", ondelete="CASCADE"))
    evaluated_at: Mapped[datetime] = mapped_column(UTCDateTime)
    metric: Mapped[str] = mapped_column(String(100))
    value: Mapped[float] = mapped_column(Double)

    __table_args__ = (
        # The idempotency key (pipeline, run_id, evaluated_at, metric): run_pk implies both.
        UniqueConstraint("run_pk", "evaluated_at", "metric"),
        Index("ix_evaluation_pipeline_evaluated", "pipeline_id", "evaluated_at"),
    )


class ApiToken(CreatedAt, Base):
    __tablename__ = "api_token"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    # Space-separated subset of: ingest read admin.
    scopes: Mapped[str] = mapped_column(String(100))
    # SHA-256 of the token. Tokens carry 256 random bits, so a fast hash is safe;
    # the token itself is shown once and never stored.
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    prefix: Mapped[str] = mapped_column(String(16))
    # Ingest tokens may be limited to named pipelines (null: all pipelines).
    pipelines: Mapped[list[str] | None] = mapped_column(JSON, nullable=True)
    last_used_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)


class SignedOutSession(Base):
    """A browser session signed out before it expired: its cookie, even a copy, is dead.

    Rows are needed only until the cookie would have expired; sign-outs delete the
    expired ones.
    """

    __tablename__ = "signed_out_session"

    sid: Mapped[str] = mapped_column(String(32), primary_key=True)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime, index=True)


class AlertRule(CreatedAt, Base):
    """A budget or goodput alert on one pipeline, with its current state (app/alerts)."""

    __tablename__ = "alert_rule"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    pipeline_id: Mapped[int] = mapped_column(
        ForeignKey("pipeline.id", ondelete="CASCADE"), index=True
    )
    # One of app.alerts.rules.AlertKind (the check below lists the same names; a test
    # keeps them equal). Thresholds: cost_over_budget: percent of budget;
    # goodput_drop: points week over week; utilization_floor: a fraction 0..1.
    kind: Mapped[str] = mapped_column(String(32))
    threshold: Mapped[float] = mapped_column(Double)
    webhook_url: Mapped[str] = mapped_column(String(2000))
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    # State: changed only by evaluation; a webhook is sent when `firing` flips.
    firing: Mapped[bool] = mapped_column(Boolean, default=False)
    since: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    last_value: Mapped[float | None] = mapped_column(Double, nullable=True)
    last_evaluated_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    # The pipeline's run change count (the sum of its run_variant change counters) that the
    # last evaluation saw. Every acknowledged run write moves the change count in its own
    # transaction, so a rule whose value differs has runs it has not judged: the sweeper
    # (app/alerts/sweeper.py) evaluates it, after a crash or a failed evaluation too.
    evaluated_changes: Mapped[int | None] = mapped_column(BigInteger, nullable=True)

    __table_args__ = (
        CheckConstraint(
            "kind IN ('cost_over_budget', 'goodput_drop', 'utilization_floor', 'weekly_digest', "
            "'budget_likely_over')",
            name="kind_known",
        ),
    )


class AlertDelivery(CreatedAt, Base):
    """One webhook notification for a rule's state change: the outbox row, written in the
    same transaction as the change and drained by the sender (app/alerts/sender.py)."""

    __tablename__ = "alert_delivery"

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True, autoincrement=True)
    rule_id: Mapped[int] = mapped_column(ForeignKey("alert_rule.id", ondelete="CASCADE"))
    event: Mapped[str] = mapped_column(String(16))  # firing | resolved
    payload: Mapped[dict[str, Any]] = mapped_column(JSON)
    # pending (not tried yet) | retrying | delivered | failed (gave up) | superseded (a
    # later state of the rule replaced it before it was sent: flapping)
    status: Mapped[str] = mapped_column(String(16))
    attempts: Mapped[int] = mapped_column(Integer)
    response_status: Mapped[int | None] = mapped_column(Integer, nullable=True)
    # One line per failed attempt ("attempt 1: HTTP 500"), null when the first succeeded.
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    # The first moment it may be sent: at most one notification per rule per
    # CADENCE_ALERT_MIN_INTERVAL_SECONDS. Retries do not move it.
    scheduled_at: Mapped[datetime] = mapped_column(UTCDateTime)
    # When the sender should try next; null once delivered, failed or superseded.
    next_attempt_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    last_attempt_at: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    # A sender's claim (a lease): another sender leaves the row alone until it expires.
    claimed_until: Mapped[datetime | None] = mapped_column(UTCDateTime, nullable=True)
    claim_token: Mapped[str | None] = mapped_column(String(32), nullable=True)

    __table_args__ = (
        Index("ix_alert_delivery_rule_created", "rule_id", "created_at"),
        Index("ix_alert_delivery_next_attempt_at", "next_attempt_at"),
    )


# Tables kept in a module of their own, named here so every table is in this module's
# namespace (Alembic's autogenerate, and imports of app.db.models).
from app.db.models_bills import BillTotal  # noqa: E402
from app.db.models_forecast import ForecastRecord  # noqa: E402
from app.db.models_kept import KeptSnapshot  # noqa: E402
from app.db.models_org import OrgSetting  # noqa: E402
from app.db.models_records import (  # noqa: E402
    BillLine,
    ChangeNote,
    PipelineChange,
    RunMeasurementChange,
)

__all__ = [
    "BillLine",
    "BillTotal",
    "ChangeNote",
    "ForecastRecord",
    "KeptSnapshot",
    "OrgSetting",
    "PipelineChange",
    "RunMeasurementChange",
]
