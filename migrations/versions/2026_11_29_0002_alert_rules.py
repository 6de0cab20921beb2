"""Alerts: alert_rule (with its state) and alert_delivery.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29 19:40:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0002'
down_revision: str | None = '0001'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('alert_rule',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('pipeline_id', sa.Integer(), nullable=False),
    sa.Column('kind', sa.String(length=32), nullable=False),
    sa.Column('threshold', sa.Double(), nullable=False),
    sa.Column('webhook_url', sa.String(length=2000), nullable=False),
    sa.Column('enabled', sa.Boolean(), nullable=False),
    sa.Column('firing', sa.Boolean(), nullable=False),
    sa.Column('since', sa.DateTime(timezone=True), nullable=True),
    sa.Column('last_value', sa.Double(), nullable=True),
    sa.Column('last_evaluated_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('(CURRENT_TIMESTAMP)'), nullable=False),
    sa.CheckConstraint("kind IN ('cost_over_budget', 'goodput_drop', 'utilization_floor')", name=op.f('ck_alert_rule_kind_known')),
    sa.ForeignKeyConstraint(['pipeline_id'], ['pipeline.id'], name=op.f('fk_alert_rule_pipeline_id_pipeline'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_alert_rule'))
    )
    with op.batch_alter_table('alert_rule', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_alert_rule_pipeline_id'), ['pipeline_id'], unique=False)

    op.create_table('alert_delivery',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('rule_id', sa.Integer(), nullable=False),
    sa.Column('event', sa.String(length=16), nullable=False),
    sa.Column('payload', sa.JSON(), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('response_status', sa.Integer(), nullable=True),
    sa.Column('error', sa.Text(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), server_default=sa.text('(CURRENT_TIMESTAMP)'), nullable=False),
    sa.ForeignKeyConstraint(['rule_id'], ['alert_rule.id'], name=op.f('fk_alert_delivery_rule_id_alert_rule'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_alert_delivery'))
    )
    with op.batch_alter_table('alert_delivery', schema=None) as batch_op:
        batch_op.create_index('ix_alert_delivery_rule_created', ['rule_id', 'created_at'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('alert_delivery', schema=None) as batch_op:
        batch_op.drop_index('ix_alert_delivery_rule_created')

    op.drop_table('alert_delivery')
    with op.batch_alter_table('alert_rule', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_alert_rule_pipeline_id'))

    op.drop_table('alert_rule')
