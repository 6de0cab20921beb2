"""Runs: utilization_source (which metric measured gpu_utilization).

Revision ID: 0004
Revises: 0006
Create Date: 2026-11-30 17:20:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0004'
down_revision: str | None = '0006'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Nullable with no default: adding it rewrites no row (runs stored before say nothing
    # about their source, and are shown as unknown).
    with op.batch_alter_table('run', schema=None) as batch_op:
        batch_op.add_column(sa.Column('utilization_source', sa.String(length=32), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('run', schema=None) as batch_op:
        batch_op.drop_column('utilization_source')
