"""Bill lines know their import; each pipeline's reconciled month is kept at import.

Revision ID: 0025
Revises: 0026
Create Date: 2026-12-03 08:00:00.000000

bill_line.import_id names the import that stored a line last (a later import of the same
resources and periods replaces the earlier's lines); bill_total keeps each pipeline's
figures of a month, written by the import. Lines stored before keep a NULL import_id and
their old row key: the next import of their period replaces them.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0025"
down_revision: str | None = "0026"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("bill_line") as batch:
        batch.add_column(sa.Column("import_id", sa.String(length=32), nullable=True))
    op.create_index("ix_bill_line_import", "bill_line", ["import_id"])
    op.create_table(
        "bill_total",
        sa.Column("month", sa.Date(), nullable=False),
        sa.Column("pipeline", sa.String(length=63), nullable=False),
        sa.Column("billed_usd", sa.Double(), nullable=False),
        sa.Column("explained_usd", sa.Double(), nullable=False),
        sa.Column("billed_gpu_hours", sa.Double(), nullable=False),
        sa.Column("explained_gpu_hours", sa.Double(), nullable=False),
        sa.Column("recorded_gpu_hours", sa.Double(), nullable=False),
        sa.Column("lines", sa.Integer(), nullable=False),
        sa.Column("runs_stamp", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("month", "pipeline", name=op.f("pk_bill_total")),
    )


def downgrade() -> None:
    op.drop_table("bill_total")
    op.drop_index("ix_bill_line_import", table_name="bill_line")
    with op.batch_alter_table("bill_line") as batch:
        batch.drop_column("import_id")
