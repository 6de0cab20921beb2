"""Attempts: run.outcome and run.retraining_id, gpu_utilization optional, and the rollup
sums of failed attempts and unmeasured ones.

Every stored run so far is a succeeded attempt of a retraining of its own, so the
backfill is outcome 'succeeded', retraining_id = run_id, and zero for the new sums (the
rollup terms of a succeeded, measured attempt are unchanged).

Revision ID: 0018
Revises: 0013
Create Date: 2026-12-01 17:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0018'
down_revision: str | None = '0013'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

NEW_SUMS = ('unmeasured', 'g_failed', 'u_failed')


def upgrade() -> None:
    with op.batch_alter_table('run') as batch:
        batch.add_column(sa.Column(
            'outcome', sa.String(length=16), nullable=False, server_default='succeeded'))
        batch.add_column(sa.Column('retraining_id', sa.String(length=200), nullable=True))
        batch.alter_column('gpu_utilization', existing_type=sa.Double(), nullable=True)
    op.execute("UPDATE run SET retraining_id = run_id")
    with op.batch_alter_table('run') as batch:
        batch.alter_column('outcome', server_default=None, existing_type=sa.String(length=16))
        batch.alter_column('retraining_id', existing_type=sa.String(length=200), nullable=False)
        batch.create_check_constraint(
            'outcome_known', "outcome IN ('succeeded', 'failed', 'preempted', 'cancelled')")
        batch.create_index('ix_run_pipeline_retraining', ['pipeline_id', 'retraining_id'])
    with op.batch_alter_table('run_rollup') as batch:
        for name in NEW_SUMS:
            batch.add_column(sa.Column(name, sa.Double(), nullable=False, server_default='0'))
    with op.batch_alter_table('run_rollup') as batch:
        for name in NEW_SUMS:
            batch.alter_column(name, server_default=None, existing_type=sa.Double())
    # The rollups again from the runs, with the application's recomputation (it reads
    # the columns this revision adds): 0009 created the table empty for this. A
    # database that already had rollups gets the same sums, plus the new ones (all 0).
    from app.db.rollup import rebuild

    rebuild(op.get_bind())


def downgrade() -> None:
    with op.batch_alter_table('run_rollup') as batch:
        for name in NEW_SUMS:
            batch.drop_column(name)
    unmeasured = op.get_bind().execute(
        sa.text("SELECT count(*) FROM run WHERE gpu_utilization IS NULL")).scalar_one()
    if unmeasured:  # the old schema cannot hold them: say so rather than drop data
        raise RuntimeError(
            f"{unmeasured} runs have no gpu_utilization, which revision 0013 cannot store; "
            "delete them (DELETE /api/v1/runs/{id}) before downgrading")
    with op.batch_alter_table('run') as batch:
        batch.drop_index('ix_run_pipeline_retraining')
        batch.drop_constraint('outcome_known', type_='check')
        batch.drop_column('retraining_id')
        batch.drop_column('outcome')
        batch.alter_column('gpu_utilization', existing_type=sa.Double(), nullable=False)
