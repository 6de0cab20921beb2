"""kept_snapshot: the values a worker keeps between requests, kept by the database too,
so a new worker's first org-wide read finds them (issue 38, the warm start). One row
per code version; nothing reads it as a source of truth, so downgrading drops it.

Revision ID: 0032
Revises: 0031
Create Date: 2026-12-03 21:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0032"
down_revision: str | None = "0031"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "kept_snapshot",
        sa.Column("code", sa.String(64), nullable=False),
        sa.Column("written_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("entries", sa.Integer(), nullable=False),
        sa.Column("payload", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("code", name=op.f("pk_kept_snapshot")),
    )
    if op.get_bind().dialect.name == "postgresql":
        # Not compressed: a pickle of floats gains little, and compressing 70 MB took
        # 3.6 of the 5.8 s a write took (10M runs, 5,000 pipelines).
        op.execute("ALTER TABLE kept_snapshot ALTER COLUMN payload SET STORAGE EXTERNAL")


def downgrade() -> None:
    op.drop_table("kept_snapshot")
