"""Alert outbox: alert_delivery rows are queued, claimed, retried and scheduled.

Revision ID: 0003
Revises: 0005
Create Date: 2026-11-30 17:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0003'
down_revision: str | None = '0005'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('alert_delivery', schema=None) as batch_op:
        batch_op.add_column(sa.Column('scheduled_at', sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column('next_attempt_at', sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column('last_attempt_at', sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column('claimed_until', sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column('claim_token', sa.String(length=32), nullable=True))
    # Deliveries made before the outbox were sent when they were recorded.
    op.execute('UPDATE alert_delivery SET scheduled_at = created_at, last_attempt_at = created_at')
    with op.batch_alter_table('alert_delivery', schema=None) as batch_op:
        batch_op.alter_column('scheduled_at', existing_type=sa.DateTime(timezone=True), nullable=False)
        batch_op.create_index('ix_alert_delivery_next_attempt_at', ['next_attempt_at'], unique=False)


def downgrade() -> None:
    # Rows still queued would read as sent: record them as failed.
    op.execute("UPDATE alert_delivery SET status = 'failed' WHERE status NOT IN ('delivered', 'failed')")
    with op.batch_alter_table('alert_delivery', schema=None) as batch_op:
        batch_op.drop_index('ix_alert_delivery_next_attempt_at')
        batch_op.drop_column('claim_token')
        batch_op.drop_column('claimed_until')
        batch_op.drop_column('last_attempt_at')
        batch_op.drop_column('next_attempt_at')
        batch_op.drop_column('scheduled_at')
