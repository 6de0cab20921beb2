"""The org_setting table: the organisation's budget and risk tolerance for the cadence plan.

Revision ID: 0026
Revises: 0023
Create Date: 2026-12-03 08:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0026'
down_revision: str | None = '0023'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        'org_setting',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('budget_usd', sa.Double(), nullable=True),
        sa.Column('risk', sa.Double(), server_default='0.1', nullable=False),
        sa.Column('updated_by', sa.String(length=200), nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('(CURRENT_TIMESTAMP)'), nullable=False),
        sa.CheckConstraint('budget_usd IS NULL OR budget_usd >= 0', name=op.f('ck_org_setting_budget_non_negative')),
        sa.CheckConstraint('risk > 0 AND risk < 1', name=op.f('ck_org_setting_risk_fraction')),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_org_setting')),
    )


def downgrade() -> None:
    op.drop_table('org_setting')
