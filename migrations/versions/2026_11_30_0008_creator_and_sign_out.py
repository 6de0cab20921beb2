"""pipeline.created_by_token_id (per-token creation limit); signed_out_session (sign-out).

Revision ID: 0008
Revises: 0002
Create Date: 2026-11-30 17:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0008'
down_revision: str | None = '0002'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('signed_out_session',
    sa.Column('sid', sa.String(length=32), nullable=False),
    sa.Column('expires_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('sid', name=op.f('pk_signed_out_session'))
    )
    with op.batch_alter_table('signed_out_session', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_signed_out_session_expires_at'), ['expires_at'], unique=False)

    with op.batch_alter_table('pipeline', schema=None) as batch_op:
        batch_op.add_column(sa.Column('created_by_token_id', sa.Integer(), nullable=True))
        batch_op.create_index(
            'ix_pipeline_creator_created', ['created_by_token_id', 'created_at'], unique=False
        )


def downgrade() -> None:
    # Not batch mode: on SQLite a batch drop_column rebuilds the table, and dropping the
    # old pipeline table would cascade to its runs. SQLite >= 3.35 drops a column itself.
    op.drop_index('ix_pipeline_creator_created', table_name='pipeline')
    op.drop_column('pipeline', 'created_by_token_id')
    with op.batch_alter_table('signed_out_session', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_signed_out_session_expires_at'))

    op.drop_table('signed_out_session')
