"""Audit trail of measurements changed on stored runs: run_measurement_change.

Revision ID: 0016
Revises: 0014
Create Date: 2026-12-01 16:10:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0016'
down_revision: str | None = '0014'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        'run_measurement_change',
        sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
        sa.Column('run_pk', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
        sa.Column('changed_by', sa.String(length=200), nullable=False),
        sa.Column('field', sa.String(length=64), nullable=False),
        sa.Column('old_value', sa.Text(), nullable=True),
        sa.Column('new_value', sa.Text(), nullable=True),
        sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('(CURRENT_TIMESTAMP)'), nullable=False),
        sa.ForeignKeyConstraint(['run_pk'], ['run.id'], name=op.f('fk_run_measurement_change_run_pk_run'), ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_run_measurement_change')),
    )
    op.create_index('ix_run_measurement_change_run_created', 'run_measurement_change', ['run_pk', 'created_at'], unique=False)


def downgrade() -> None:
    op.drop_index('ix_run_measurement_change_run_created', table_name='run_measurement_change')
    op.drop_table('run_measurement_change')
