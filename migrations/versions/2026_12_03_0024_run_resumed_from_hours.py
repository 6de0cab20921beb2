"""run.resumed_from_hours: the progress an attempt resumed from an earlier attempt's
checkpoint, which is not failed-attempt badput (docs/methodology.md §2).

Every stored run so far resumed nothing: the backfill is 0. The rollups are rebuilt
all the same: ``mfu_hours`` now counts only attempts that reported MFU (it counted
failed and unmeasured attempts too), so rows holding those change.

Revision ID: 0024
Revises: 0022
Create Date: 2026-12-03 08:00:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0024'
down_revision: str | None = '0022'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table('run') as batch:
        batch.add_column(
            sa.Column('resumed_from_hours', sa.Double(), nullable=False, server_default='0'))
    with op.batch_alter_table('run') as batch:
        batch.alter_column('resumed_from_hours', server_default=None, existing_type=sa.Double())
    from app.db.rollup import rebuild

    rebuild(op.get_bind())


def downgrade() -> None:
    # The old schema cannot hold resumed progress: the rollups go back to counting every
    # failed attempt's GPU-hours in full before the column goes (their mfu_hours keep
    # this revision's meaning: the application's terms compute them).
    bind = op.get_bind()
    if bind.execute(sa.text("SELECT count(*) FROM run WHERE resumed_from_hours > 0")).scalar_one():
        op.execute("UPDATE run SET resumed_from_hours = 0")
        from app.db.rollup import rebuild

        rebuild(bind)
    with op.batch_alter_table('run') as batch:
        batch.drop_column('resumed_from_hours')
