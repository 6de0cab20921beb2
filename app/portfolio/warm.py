"""A warm start: the organisation-wide reads a worker's first overview or review would
make, made once in the background as the server starts (issue 38).

A cold worker on 10M runs spends seconds on its first org-wide read: every pipeline's
weeks, cost windows and month to date, read and kept for the requests after it. Made
here, in a thread, they are kept before a reader asks, and readiness is not delayed.
A request that comes while the thread works computes its own answer as before (the kept
values it finds are used, none is wrong), so nothing waits on the warm start and a
failed one changes nothing but speed.

Made once, the values are written to the database for the next worker to start with
(``app.db.kept_snapshot``), and again every ``CADENCE_KEPT_SNAPSHOT_MINUTES``: a worker
that read them there at start makes only what moved since.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import UTC, datetime

from app.db import kept_snapshot
from app.db.engine import Database
from app.planning.weekly import last_complete_week
from app.portfolio.service import load_portfolio
from app.review.service import load_review, top_actions

log = logging.getLogger("cadence.warm")


def warm(db: Database) -> float:
    """Make and keep what the overview and the review read for every pipeline (no
    token's limit, no team); the seconds it took."""
    began = time.perf_counter()
    today = datetime.now(UTC).date()
    with db.read() as session:
        load_portfolio(session, None, None, today)
    with db.read() as session:
        review = load_review(session, None, last_complete_week(today), None)
        top_actions(session, review.lines)
    return time.perf_counter() - began


class Warmer:
    """Runs :func:`warm` once in a daemon thread, then writes what is kept to the database
    at once and every ``snapshot_minutes`` after (0: never; ``loaded``: not at once);
    ``start`` returns at once."""

    def __init__(self, db: Database, snapshot_minutes: float = 0.0, loaded: bool = False) -> None:
        self.db = db
        self.snapshot_minutes = snapshot_minutes
        # Started from the database's values: nothing new to write until the first period
        # (a write at once would only take CPU from the first readers).
        self.loaded = loaded
        self.seconds: float | None = None  # how long it took, once done
        self.written = 0  # snapshots written
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name="cadence-warm", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.stopping.set()
        if self.thread.is_alive():
            self.thread.join(timeout=10)

    def _run(self) -> None:
        try:
            self.seconds = warm(self.db)
            log.info("warm start: org-wide reads kept in %.1f s", self.seconds)
        except Exception as exc:  # a warm start only saves time: never stop the server
            log.warning("warm start failed (the first reader will wait instead): %s", exc)
        if self.snapshot_minutes <= 0:
            return
        period = self.snapshot_minutes * 60
        if self.loaded:
            self.stopping.wait(period)
        while not self.stopping.is_set():
            self._write()
            self.stopping.wait(period)

    def _write(self) -> None:
        try:
            count = kept_snapshot.save(self.db)
            self.written += 1
            log.info("kept values written to the database: %d", count)
        except Exception as exc:  # as the warm start: only speed is at stake
            log.warning("kept values not written to the database: %s", exc)
