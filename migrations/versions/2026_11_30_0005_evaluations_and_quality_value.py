"""Evaluations (quality of the serving model by age) and pipeline.quality_value_usd_per_unit_month.

Revision ID: 0005
Revises: 0008
Create Date: 2026-11-30 16:59:22.353065
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0005'
down_revision: str | None = '0008'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('evaluation',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('pipeline_id', sa.Integer(), nullable=False),
    sa.Column('run_pk', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('evaluated_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('metric', sa.String(length=100), nullable=False),
    sa.Column('value', sa.Double(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('(CURRENT_TIMESTAMP)'), nullable=False),
    sa.ForeignKeyConstraint(['pipeline_id'], ['pipeline.id'], name=op.f('fk_evaluation_pipeline_id_pipeline'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['run_pk'], ['run.id'], name=op.f('fk_evaluation_run_pk_run'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_evaluation')),
    sa.UniqueConstraint('run_pk', 'evaluated_at', 'metric', name=op.f('uq_evaluation_run_pk_evaluated_at_metric'))
    )
    with op.batch_alter_table('evaluation', schema=None) as batch_op:
        batch_op.create_index('ix_evaluation_pipeline_evaluated', ['pipeline_id', 'evaluated_at'], unique=False)

    with op.batch_alter_table('pipeline', schema=None) as batch_op:
        batch_op.add_column(sa.Column('quality_value_usd_per_unit_month', sa.Double(), nullable=True))



def downgrade() -> None:
    with op.batch_alter_table('pipeline', schema=None) as batch_op:
        batch_op.drop_column('quality_value_usd_per_unit_month')

    with op.batch_alter_table('evaluation', schema=None) as batch_op:
        batch_op.drop_index('ix_evaluation_pipeline_evaluated')

    op.drop_table('evaluation')
