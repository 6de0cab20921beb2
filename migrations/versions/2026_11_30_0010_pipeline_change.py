"""Pipeline settings audit trail: pipeline_change (who, when, field, old, new).

Revision ID: 0010
Revises: 0004
Create Date: 2026-11-30 18:15:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0010'
down_revision: str | None = '0009'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        'pipeline_change',
        sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
        sa.Column('pipeline_id', sa.Integer(), nullable=False),
        sa.Column('changed_by', sa.String(length=200), nullable=False),
        sa.Column('field', sa.String(length=64), nullable=False),
        sa.Column('old_value', sa.Text(), nullable=True),
        sa.Column('new_value', sa.Text(), nullable=True),
        sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('(CURRENT_TIMESTAMP)'), nullable=False),
        sa.ForeignKeyConstraint(['pipeline_id'], ['pipeline.id'], name=op.f('fk_pipeline_change_pipeline_id_pipeline'), ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_pipeline_change')),
    )
    op.create_index('ix_pipeline_change_pipeline_created', 'pipeline_change', ['pipeline_id', 'created_at'], unique=False)


def downgrade() -> None:
    op.drop_index('ix_pipeline_change_pipeline_created', table_name='pipeline_change')
    op.drop_table('pipeline_change')
