"""alert_rule.evaluated_changes: the run signature each rule's last evaluation saw, so a
rule left unevaluated by a crash or an error is found and evaluated again.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-01 16:30:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0013'
down_revision: str | None = '0012'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # NULL for every existing rule: the first sweep after the upgrade evaluates each once.
    with op.batch_alter_table('alert_rule') as batch:
        batch.add_column(sa.Column('evaluated_changes', sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('alert_rule') as batch:
        batch.drop_column('evaluated_changes')
