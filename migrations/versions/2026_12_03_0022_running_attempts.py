"""Running attempts: run.finished_at is NULL while an attempt runs (outcome 'running').

An attempt may be reported at its start (outcome 'running', no finished_at) and completed
later under the same (pipeline, run_id). The checks: the outcome 'running' is known, and
only a running attempt lacks finished_at. A partial index finds the running attempts of
a pipeline without a scan (month to date reads them).

Revision ID: 0022
Revises: 0025
Create Date: 2026-12-03 08:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0022'
down_revision: str | None = '0025'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

KNOWN = "outcome IN ('succeeded', 'failed', 'preempted', 'cancelled', 'running')"
OLD_KNOWN = "outcome IN ('succeeded', 'failed', 'preempted', 'cancelled')"
UNFINISHED = (
    "(outcome = 'running' AND finished_at IS NULL) "
    "OR (outcome <> 'running' AND finished_at IS NOT NULL)"
)
WHERE = sa.text('finished_at IS NULL')


def upgrade() -> None:
    with op.batch_alter_table('run') as batch:
        batch.drop_constraint('outcome_known', type_='check')
        batch.alter_column('finished_at', existing_type=sa.DateTime(timezone=True), nullable=True)
        batch.create_check_constraint('outcome_known', KNOWN)
        batch.create_check_constraint('running_unfinished', UNFINISHED)
    op.create_index(
        'ix_run_running', 'run', ['pipeline_id'], postgresql_where=WHERE, sqlite_where=WHERE
    )


def downgrade() -> None:
    running = op.get_bind().execute(
        sa.text("SELECT count(*) FROM run WHERE outcome = 'running'")).scalar_one()
    if running:  # the old schema cannot hold them: say so rather than drop data
        raise RuntimeError(
            f"{running} attempts are still running, which revision 0026 cannot store; "
            "complete or delete them before downgrading")
    op.drop_index('ix_run_running', table_name='run')
    with op.batch_alter_table('run') as batch:
        batch.drop_constraint('running_unfinished', type_='check')
        batch.drop_constraint('outcome_known', type_='check')
        batch.alter_column('finished_at', existing_type=sa.DateTime(timezone=True), nullable=False)
        batch.create_check_constraint('outcome_known', OLD_KNOWN)
