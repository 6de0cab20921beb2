"""The cost basis 'median' is renamed 'expected_bill' (the figure it has read since the bill).

Revision ID: 0020
Revises: 0016
Create Date: 2026-12-01 20:00:00.000000

Stored 'median' becomes 'expected_bill'; the column widens to hold it and the check
accepts the new word only (the API refuses the old one with a 422 naming the new).
Downgrade maps 'expected_bill' back to 'median'.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0020'
down_revision: str | None = '0016'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('pipeline') as batch:
        batch.drop_constraint('gate_cost_basis_known', type_='check')
        batch.alter_column(
            'gate_cost_basis',
            existing_type=sa.String(length=8),
            type_=sa.String(length=16),
            existing_nullable=False,
            existing_server_default='p90',
        )
    op.execute("UPDATE pipeline SET gate_cost_basis = 'expected_bill' WHERE gate_cost_basis = 'median'")
    with op.batch_alter_table('pipeline') as batch:
        batch.create_check_constraint(
            'gate_cost_basis_known', "gate_cost_basis IN ('expected_bill','p90')"
        )


def downgrade() -> None:
    with op.batch_alter_table('pipeline') as batch:
        batch.drop_constraint('gate_cost_basis_known', type_='check')
    op.execute("UPDATE pipeline SET gate_cost_basis = 'median' WHERE gate_cost_basis = 'expected_bill'")
    with op.batch_alter_table('pipeline') as batch:
        batch.alter_column(
            'gate_cost_basis',
            existing_type=sa.String(length=16),
            type_=sa.String(length=8),
            existing_nullable=False,
            existing_server_default='p90',
        )
        batch.create_check_constraint('gate_cost_basis_known', "gate_cost_basis IN ('median', 'p90')")
