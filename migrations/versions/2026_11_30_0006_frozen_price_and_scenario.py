"""Freeze the billed price on each run; pipeline production variant and gate settings.

Revision ID: 0006
Revises: 0003
Create Date: 2026-11-30 17:00:00.000000

Existing runs are backfilled with the price in force now (their own, else their
pipeline's): the best record there is of what they were billed at.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0006'
down_revision: str | None = '0003'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('pipeline') as batch:
        batch.add_column(sa.Column(
            'production_variant', sa.String(length=64), server_default='baseline', nullable=False
        ))
        batch.add_column(sa.Column(
            'gate_cost_basis', sa.String(length=8), server_default='p90', nullable=False
        ))
        batch.add_column(sa.Column('gate_power', sa.Double(), server_default='0.8', nullable=False))
        batch.create_check_constraint(
            'gate_cost_basis_known', "gate_cost_basis IN ('median', 'p90')"
        )
        batch.create_check_constraint('gate_power_fraction', 'gate_power > 0 AND gate_power < 1')
    op.add_column('run', sa.Column('billed_price_per_gpu_hour', sa.Double(), nullable=True))
    op.execute(
        "UPDATE run SET billed_price_per_gpu_hour = COALESCE(price_per_gpu_hour, "
        "(SELECT p.price_per_gpu_hour FROM pipeline p WHERE p.id = run.pipeline_id))"
    )
    with op.batch_alter_table('run') as batch:
        batch.alter_column('billed_price_per_gpu_hour', existing_type=sa.Double(), nullable=False)


def downgrade() -> None:
    with op.batch_alter_table('run') as batch:
        batch.drop_column('billed_price_per_gpu_hour')
    with op.batch_alter_table('pipeline') as batch:
        batch.drop_constraint('gate_power_fraction', type_='check')
        batch.drop_constraint('gate_cost_basis_known', type_='check')
        batch.drop_column('gate_power')
        batch.drop_column('gate_cost_basis')
        batch.drop_column('production_variant')
