"""The bill's kept totals marked moved by the run writes that change them.

``cadence import focus`` keeps each pipeline's reconciled month (``bill_total``). Its
figures depend on the runs that name a cloud resource (``cloud_resource_id``) and
overlap the month: their holdings explain the lines, their GPU-hours are the recorded
ones. Every writer of runs (:mod:`app.db.rollup`'s add, complete and subtract) calls
:func:`mark_moved` in its transaction, so a run stored, completed or deleted marks each
month it overlaps moved, and the reconciliation reads the lines again instead of totals
that no longer hold. Runs without a cloud resource change nothing there and mark
nothing (no statement is added to their writes).

The mark is the ``runs_stamp`` of the month's unclaimed row (``pipeline = ''``, written
by every import for every month it keeps, and read with any pipeline's rows): ``kept:``
and a fresh value at import, ``moved:`` and a fresh value at each write, so whatever a
server process reconciled from the lines is keyed by it too.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, date, datetime

from sqlalchemy import select, text, update

from app.db.engine import WriteSession
from app.db.models import BillTotal, Run
from app.db.sql import dialect, in_ids_param

RESOURCE_TAG = "cloud_resource_id"
UNCLAIMED = ""  # bill_total.pipeline of the lines no pipeline claims
KEPT, MOVED = "kept:", "moved:"
# One lock for the totals: an import keeping a month holds it alone, run writes that
# mark share it (PostgreSQL). A run committed while an import reconciled would
# otherwise be in neither: not in the import's figures, its mark overwritten by them.
LOCK_KEY = "hashtext('cadence.bill_totals')"


def kept_stamp() -> str:
    """The stamp an import writes on the totals it keeps."""
    return KEPT + uuid.uuid4().hex


def holds(stamp: str) -> bool:
    """Whether totals with this stamp still hold (no run of their month moved since;
    stamps of the first release of kept totals, before marks, are not trusted)."""
    return stamp.startswith(KEPT)


def lock_totals(session: WriteSession) -> None:
    """Keep the totals alone until the transaction ends (PostgreSQL; SQLite's write
    lock already is one): run writes that would mark them wait, or were committed."""
    if dialect(session) == "postgresql":
        session.execute(text(f"SELECT pg_advisory_xact_lock({LOCK_KEY})"))


def months_of(spans: Sequence[tuple[datetime, datetime]]) -> list[date]:
    """The first day of every month any of these [start, end) spans reaches into."""
    months: set[date] = set()
    for start, end in spans:
        at = date(start.year, start.month, 1)
        last = _utc(end)
        while datetime(at.year, at.month, 1, tzinfo=UTC) < last:
            months.add(at)
            at = date(at.year + at.month // 12, at.month % 12 + 1, 1)
    return sorted(months)


def _utc(at: datetime) -> datetime:
    # SQLite hands back naive datetimes (UTC by the column's type in app/db/base.py).
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


def mark_moved(session: WriteSession, run_ids: Sequence[int]) -> None:
    """Mark moved the kept totals of every month a finished run among ``run_ids`` that
    names a cloud resource overlaps (call it while the runs are stored: before a
    delete, after an insert or a completion)."""
    if not run_ids:
        return
    ids = sorted(run_ids)
    tag = Run.tags[RESOURCE_TAG].as_string()
    spans = session.execute(
        select(Run.started_at, Run.finished_at).where(
            in_ids_param(dialect(session), Run.id, list(ids)),
            Run.id.between(ids[0], ids[-1]),
            tag.is_not(None),
            Run.finished_at.is_not(None),
        )
    ).all()
    if not spans:
        return
    if dialect(session) == "postgresql":
        session.execute(text(f"SELECT pg_advisory_xact_lock_shared({LOCK_KEY})"))
    session.execute(
        update(BillTotal)
        .where(BillTotal.month.in_(months_of([(s, f) for s, f in spans if f is not None])))
        .where(BillTotal.pipeline == UNCLAIMED)
        .values(runs_stamp=MOVED + uuid.uuid4().hex)
    )
