"""bill_line.gpus_per_unit: a real number, so an instance type that holds part of one
GPU (AWS g6f, Azure NVadsA10 v5) counts its fraction (issue 37).

Every stored value is a whole number, kept as it was. Downgrading rounds fractions up:
a line of part of a GPU would otherwise read 0 GPUs.

Revision ID: 0031
Revises: 0024
Create Date: 2026-12-03 11:40:00.000000
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0031"
down_revision: str | None = "0024"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("bill_line") as batch:
        batch.alter_column(
            "gpus_per_unit", type_=sa.Double(), existing_type=sa.Integer(), existing_nullable=False
        )


def downgrade() -> None:
    op.execute(
        "UPDATE bill_line SET gpus_per_unit = ceil(gpus_per_unit)"
        if op.get_bind().dialect.name == "postgresql"
        else "UPDATE bill_line SET gpus_per_unit = CAST(gpus_per_unit + 0.999999 AS INTEGER)"
    )
    with op.batch_alter_table("bill_line") as batch:
        batch.alter_column(
            "gpus_per_unit",
            type_=sa.Integer(),
            existing_type=sa.Double(),
            existing_nullable=False,
            postgresql_using="gpus_per_unit::integer",
        )
