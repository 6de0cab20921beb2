"""Pipeline settings: variant descriptions and the gate's quality margin.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-30 20:30:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0011'
down_revision: str | None = '0010'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('pipeline') as batch:
        batch.add_column(sa.Column('variant_descriptions', sa.JSON(), nullable=True))
        batch.add_column(
            sa.Column('quality_margin', sa.Double(), server_default='0.01', nullable=False)
        )
        batch.create_check_constraint('quality_margin_non_negative', 'quality_margin >= 0')


def downgrade() -> None:
    with op.batch_alter_table('pipeline') as batch:
        batch.drop_constraint('quality_margin_non_negative', type_='check')
        batch.drop_column('quality_margin')
        batch.drop_column('variant_descriptions')
