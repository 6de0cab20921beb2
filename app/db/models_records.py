"""The change and bill tables: what was changed by whom, and the cloud's bill lines.

Kept apart from ``app.db.models`` (which re-exports them) so that no module holds every
table past the 400-line limit; Alembic sees them through that re-export.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey
from sqlalchemy.orm import Mapped, mapped_column
from sqlalchemy.schema import CheckConstraint, Index, UniqueConstraint
from sqlalchemy.types import Double, String, Text

from app.db.base import Base, BigIntPK, CreatedAt, UTCDateTime


class PipelineChange(CreatedAt, Base):
    """One setting of a pipeline changed: who (token name, or "api"/"cli"), when
    (``created_at``), which field, and the old and new values as shown to people."""

    __tablename__ = "pipeline_change"

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True, autoincrement=True)
    pipeline_id: Mapped[int] = mapped_column(ForeignKey("pipeline.id", ondelete="CASCADE"))
    changed_by: Mapped[str] = mapped_column(String(200))
    field: Mapped[str] = mapped_column(String(64))
    old_value: Mapped[str | None] = mapped_column(Text, nullable=True)
    new_value: Mapped[str | None] = mapped_column(Text, nullable=True)

    __table_args__ = (Index("ix_pipeline_change_pipeline_created", "pipeline_id", "created_at"),)


class BillLine(CreatedAt, Base):
    """One GPU line item of a cloud's FOCUS export (``cadence import focus``): a charge
    for one resource over one charge period. ``row_key`` is the charge's identity (a hash
    of its resource, accounts, category, commitment, SKU and period:
    ``app.billing.reader.charge_key``), so any export of one charge is stored once;
    ``import_id`` names the import that stored it last (the lines of an earlier import
    that a later one restates are replaced). Costs are the bill's, in USD (the importer
    refuses other currencies)."""

    __tablename__ = "bill_line"

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True, autoincrement=True)
    row_key: Mapped[str] = mapped_column(String(64), unique=True)
    source: Mapped[str] = mapped_column(String(300))
    focus_version: Mapped[str] = mapped_column(String(8))
    provider: Mapped[str] = mapped_column(String(100))
    billing_account_id: Mapped[str] = mapped_column(String(200))
    sub_account_id: Mapped[str] = mapped_column(String(200))
    region_id: Mapped[str] = mapped_column(String(64))
    resource_id: Mapped[str] = mapped_column(String(500))
    # Its last segment (i-0abc of an instance ARN), which a run's tag may name instead.
    resource_tail: Mapped[str] = mapped_column(String(500))
    sku: Mapped[str] = mapped_column(String(300))
    charge_category: Mapped[str] = mapped_column(String(32))
    commitment_status: Mapped[str] = mapped_column(String(16))
    charge_period_start: Mapped[datetime] = mapped_column(UTCDateTime)
    charge_period_end: Mapped[datetime] = mapped_column(UTCDateTime)
    currency: Mapped[str] = mapped_column(String(3))
    billed_cost: Mapped[float] = mapped_column(Double)
    # What the reconciliation counts: amortised, after discounts and commitments.
    effective_cost: Mapped[float] = mapped_column(Double)
    list_cost: Mapped[float | None] = mapped_column(Double, nullable=True)
    gpus_per_unit: Mapped[float] = mapped_column(Double)  # a fraction: part of one GPU
    gpu_hours: Mapped[float] = mapped_column(Double)
    # The line's own cadence_pipeline tag (a reservation kept for a pipeline), if any.
    pipeline_tag: Mapped[str | None] = mapped_column(String(63), nullable=True)
    import_id: Mapped[str | None] = mapped_column(String(32), nullable=True)

    __table_args__ = (
        Index("ix_bill_line_period", "charge_period_start", "charge_period_end"),
        Index("ix_bill_line_import", "import_id"),
        Index("ix_bill_line_resource_id", "resource_id"),
        Index("ix_bill_line_resource_tail", "resource_tail"),
        CheckConstraint("charge_period_end >= charge_period_start", name="period_ordered"),
    )


class RunMeasurementChange(CreatedAt, Base):
    """A stored run's measurement changed after ingest: who, when, field, old, new."""

    __tablename__ = "run_measurement_change"

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True, autoincrement=True)
    run_pk: Mapped[int] = mapped_column(ForeignKey("run.id", ondelete="CASCADE"))
    changed_by: Mapped[str] = mapped_column(String(200))
    field: Mapped[str] = mapped_column(String(64))
    old_value: Mapped[str | None] = mapped_column(Text, nullable=True)
    new_value: Mapped[str | None] = mapped_column(Text, nullable=True)
    __table_args__ = (Index("ix_run_measurement_change_run_created", "run_pk", "created_at"),)


class ChangeNote(CreatedAt, Base):
    """A declared change of a pipeline's costs ("async checkpoints landed", "data doubled"):
    a change point the bill's forecast starts after (docs/methodology.md), shown on the
    cost and goodput charts. ``at`` is when the change took effect; posting the same
    (pipeline, at, description) again is the same note, so a retry stores nothing twice."""

    __tablename__ = "change_note"

    id: Mapped[int] = mapped_column(BigIntPK, primary_key=True, autoincrement=True)
    pipeline_id: Mapped[int] = mapped_column(ForeignKey("pipeline.id", ondelete="CASCADE"))
    at: Mapped[datetime] = mapped_column(UTCDateTime)
    description: Mapped[str] = mapped_column(String(500))
    created_by: Mapped[str] = mapped_column(String(200))

    __table_args__ = (
        UniqueConstraint("pipeline_id", "at", "description", name="uq_change_note_same"),
        Index("ix_change_note_pipeline_at", "pipeline_id", "at"),
    )
