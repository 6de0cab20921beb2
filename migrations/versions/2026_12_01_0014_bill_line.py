"""bill_line: the GPU line items of imported FOCUS cloud bills (cadence import focus).

Revision ID: 0014
Revises: 0019
Create Date: 2026-12-01 16:30:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0014'
down_revision: str | None = '0019'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        'bill_line',
        sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
        sa.Column('row_key', sa.String(length=64), nullable=False),
        sa.Column('source', sa.String(length=300), nullable=False),
        sa.Column('focus_version', sa.String(length=8), nullable=False),
        sa.Column('provider', sa.String(length=100), nullable=False),
        sa.Column('billing_account_id', sa.String(length=200), nullable=False),
        sa.Column('sub_account_id', sa.String(length=200), nullable=False),
        sa.Column('region_id', sa.String(length=64), nullable=False),
        sa.Column('resource_id', sa.String(length=500), nullable=False),
        sa.Column('resource_tail', sa.String(length=500), nullable=False),
        sa.Column('sku', sa.String(length=300), nullable=False),
        sa.Column('charge_category', sa.String(length=32), nullable=False),
        sa.Column('commitment_status', sa.String(length=16), nullable=False),
        sa.Column('charge_period_start', sa.DateTime(timezone=True), nullable=False),
        sa.Column('charge_period_end', sa.DateTime(timezone=True), nullable=False),
        sa.Column('currency', sa.String(length=3), nullable=False),
        sa.Column('billed_cost', sa.Double(), nullable=False),
        sa.Column('effective_cost', sa.Double(), nullable=False),
        sa.Column('list_cost', sa.Double(), nullable=True),
        sa.Column('gpus_per_unit', sa.Integer(), nullable=False),
        sa.Column('gpu_hours', sa.Double(), nullable=False),
        sa.Column('pipeline_tag', sa.String(length=63), nullable=True),
        sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('(CURRENT_TIMESTAMP)'), nullable=False),
        sa.CheckConstraint('charge_period_end >= charge_period_start', name=op.f('ck_bill_line_period_ordered')),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_bill_line')),
        sa.UniqueConstraint('row_key', name=op.f('uq_bill_line_row_key')),
    )  # fmt: skip
    op.create_index('ix_bill_line_period', 'bill_line', ['charge_period_start', 'charge_period_end'], unique=False)  # fmt: skip
    op.create_index('ix_bill_line_resource_id', 'bill_line', ['resource_id'], unique=False)
    op.create_index('ix_bill_line_resource_tail', 'bill_line', ['resource_tail'], unique=False)


def downgrade() -> None:
    op.drop_index('ix_bill_line_resource_tail', table_name='bill_line')
    op.drop_index('ix_bill_line_resource_id', table_name='bill_line')
    op.drop_index('ix_bill_line_period', table_name='bill_line')
    op.drop_table('bill_line')
