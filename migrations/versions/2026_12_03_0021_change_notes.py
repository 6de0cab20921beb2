"""change_note: declared changes of a pipeline's costs (an optimization landed, the data
grew), the change points the bill's forecast starts after (DOMAIN.md section 9).

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-03 07:21:17.974083
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0021'
down_revision: str | None = '0020'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('change_note',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('pipeline_id', sa.Integer(), nullable=False),
    sa.Column('at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('description', sa.String(length=500), nullable=False),
    sa.Column('created_by', sa.String(length=200), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('(CURRENT_TIMESTAMP)'), nullable=False),
    sa.ForeignKeyConstraint(['pipeline_id'], ['pipeline.id'], name=op.f('fk_change_note_pipeline_id_pipeline'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_change_note')),
    sa.UniqueConstraint('pipeline_id', 'at', 'description', name='uq_change_note_same')
    )
    with op.batch_alter_table('change_note', schema=None) as batch_op:
        batch_op.create_index('ix_change_note_pipeline_at', ['pipeline_id', 'at'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('change_note', schema=None) as batch_op:
        batch_op.drop_index('ix_change_note_pipeline_at')

    op.drop_table('change_note')
