"""alert_rule.kind may be weekly_digest (every Monday, the review's week in one line).

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-01 17:20:00.000000
"""

from collections.abc import Sequence

from alembic import op

revision: str = '0019'
down_revision: str | None = '0018'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OLD = "kind IN ('cost_over_budget', 'goodput_drop', 'utilization_floor')"
NEW = "kind IN ('cost_over_budget', 'goodput_drop', 'utilization_floor', 'weekly_digest')"


def upgrade() -> None:
    with op.batch_alter_table('alert_rule') as batch:
        batch.drop_constraint('kind_known', type_='check')
        batch.create_check_constraint('kind_known', NEW)


def downgrade() -> None:
    op.execute("DELETE FROM alert_rule WHERE kind = 'weekly_digest'")
    with op.batch_alter_table('alert_rule') as batch:
        batch.drop_constraint('kind_known', type_='check')
        batch.create_check_constraint('kind_known', OLD)
