"""A large bill imports in time linear in its lines and memory that does not grow with
them (issue 36 item 5: a 200 MB FOCUS CSV, 305,000 lines, did not finish in 19 min).

No timing here: what made the import quadratic is caught by what it did, not by how
long it took. The statements an import sends grow by a few a chunk of 500 lines and one
a resource (the ORM's bulk insert once sent 4,300 for 27,000 lines); on PostgreSQL the
look-up of stored charges is never run from a generic plan (one made while the
transaction's table was small scanned the whole table, growing with every chunk); and
the month's reconciliation goes through the lines as a stream instead of holding them.
"""

from __future__ import annotations

import math
import tracemalloc
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, func, select, text

from app.billing import repository
from app.billing.command import import_files
from app.billing.reader import BillFile
from app.db.engine import Database
from app.db.models import BillLine
from tests.conftest import BACKEND
from tests.fixtures.big_bill import big_bill

# Statements of an import whatever its size: the test's savepoint and its release, the
# month's runs and its lines read, its kept totals deleted and inserted; on PostgreSQL
# also the two locks and the plan setting (its COPY goes past the counter: fewer).
FIXED = 9


@contextmanager
def counted(db: Database) -> Iterator[list[str]]:
    seen: list[str] = []

    def count(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        seen.append(" ".join(statement.split())[:80])

    event.listen(db.engine, "before_cursor_execute", count)
    try:
        yield seen
    finally:
        event.remove(db.engine, "before_cursor_execute", count)


def test_the_copy_types_name_every_column_an_import_writes() -> None:
    written = set(BillLine.__table__.columns.keys()) - {"id", "created_at"}
    assert set(repository.PG_LINE_TYPES) == written


@pytest.mark.parametrize("lines", [2_000, 4_000])
def test_statements_grow_by_chunks_and_resources_not_by_lines(
    tmp_path: Path, db: Database, lines: int
) -> None:
    path = big_bill(tmp_path / "big.csv", lines)
    with counted(db) as seen:
        assert import_files(db, [path]) == 0
    bill = BillFile(path)
    stored = sum(1 for _ in bill.lines())
    chunks = math.ceil(stored / repository.CHUNK)
    # 2,000 lines: 3 instances (ceil(2000 / 720)), all GPU, 4 chunks; 4,000: 6 and 8.
    assert (len(bill.spans), chunks) == ((3, 4) if lines == 2_000 else (6, 8))
    # A chunk: its look-up and its insert; a resource: its restated lines removed.
    bound = 2 * chunks + len(bill.spans) + FIXED
    assert len(seen) <= bound, "\n".join(seen)
    with db.read() as s:
        assert s.scalar(select(func.count()).select_from(BillLine)) == stored


@pytest.mark.skipif(BACKEND != "postgresql", reason="generic plans are PostgreSQL's")
def test_the_look_up_of_stored_charges_is_planned_for_its_keys(
    tmp_path: Path, db: Database
) -> None:
    # PostgreSQL chose a generic plan for the prepared look-up once its custom plans,
    # growing with the table, cost more than the one it made early on (a sequential
    # scan): at ~20,000 lines into a fresh table, not reliably in a test. Told to
    # prefer generic plans, the server takes them at once; the import must not.
    with db.write() as s:
        s.execute(text("SET LOCAL plan_cache_mode = force_generic_plan"))
    # 6 chunks: psycopg prepares the look-up at its 5th run, which would be generic.
    assert import_files(db, [big_bill(tmp_path / "big.csv", 3_000)]) == 0
    with db.read() as s:
        plans = s.execute(
            text(
                "SELECT generic_plans, custom_plans FROM pg_prepared_statements "
                "WHERE statement LIKE 'SELECT bill_line.id, bill_line.row_key%'"
            )
        ).all()
    assert plans, "the look-up was not prepared: the probe sees nothing"
    assert sum(p.generic_plans for p in plans) == 0
    assert sum(p.custom_plans for p in plans) >= 1


def _peak(db: Database, path: Path) -> int:
    tracemalloc.start()
    try:
        assert import_files(db, [path]) == 0
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_memory_does_not_grow_with_the_lines(tmp_path: Path, db: Database) -> None:
    small = _peak(db, big_bill(tmp_path / "small.csv", 1_000))
    large = _peak(db, big_bill(tmp_path / "large.csv", 9_000))
    # Holding the month's lines for the reconciliation cost ~400 bytes a line traced:
    # the peak went from 1.6 MB to 4.7 MB. Streamed, the two peaks are alike, 2.4 to
    # 2.8 MB (a chunk of 500 lines and a fetch of 2,000 rows either way).
    assert large - small < 2**20, f"{small / 2**20:.1f} MB, then {large / 2**20:.1f} MB"
