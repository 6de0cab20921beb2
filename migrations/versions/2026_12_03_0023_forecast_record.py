"""The forecast's own record: forecast_record, one bill forecast per pipeline and month.

Revision ID: 0023
Revises: 0021
Create Date: 2026-12-03 07:40:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0023'
down_revision: str | None = '0021'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        'forecast_record',
        sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
        sa.Column('pipeline_id', sa.Integer(), nullable=False),
        sa.Column('month', sa.Date(), nullable=False),
        sa.Column('forecast_at', sa.DateTime(timezone=True), nullable=False),
        sa.Column('expected_bill_usd', sa.Double(), nullable=False),
        sa.Column('bill_p10_usd', sa.Double(), nullable=False),
        sa.Column('bill_p90_usd', sa.Double(), nullable=False),
        sa.Column('p_over_budget', sa.Double(), nullable=True),
        sa.Column('budget_usd', sa.Double(), nullable=True),
        sa.Column('status', sa.String(length=16), nullable=True),
        sa.Column('source', sa.String(length=16), nullable=False),
        sa.CheckConstraint("source IN ('recorded', 'backtest')", name=op.f('ck_forecast_record_source_known')),
        sa.ForeignKeyConstraint(['pipeline_id'], ['pipeline.id'], name=op.f('fk_forecast_record_pipeline_id_pipeline'), ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_forecast_record')),
        sa.UniqueConstraint('pipeline_id', 'month', name=op.f('uq_forecast_record_pipeline_id_month')),
    )


def downgrade() -> None:
    op.drop_table('forecast_record')
