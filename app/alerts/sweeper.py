"""The alert sweeper: every acknowledged run is judged by the alert rules, even when the
process that stored it died before the evaluation that follows the response.

An ingest moves its pipeline's run change count (the run_variant change counters) in the
transaction that stores the run, and each evaluation records the change count it judged on
every rule (``alert_rule.evaluated_changes``). The difference between the two is the work
left undone, kept by the database itself: nothing else has to be written on the ingest
path, and a run write can never be acknowledged without it. Each serving process runs one
``Sweeper`` thread that evaluates such rules once at start-up and then every
``CADENCE_ALERT_SWEEP_SECONDS``; rules unevaluated for ``CADENCE_ALERT_REEVALUATE_SECONDS``
are evaluated too (a budget month that turned). Several processes may sweep at once: the
rule lock and the re-check under it (``evaluate(..., unless_judged_since=...)``) make the
second a no-op, and a state change is announced once (``app.alerts.service``).

``sweep`` is the same work done once, in the caller's thread (the tests use it).

The same thread keeps the forecast's record: on each wake, after the sweep, it stores
this month's forecast for pipelines that have none yet (``app.analytics.record``,
bounded per wake), so a month's forecast is kept from its first minutes.
"""

from __future__ import annotations

import logging
import threading
from datetime import datetime, timedelta

from app.alerts import repository
from app.alerts.service import evaluate
from app.analytics.record import record_months
from app.db.base import utcnow
from app.db.engine import Database
from app.exceptions import NotFound
from app.settings import Settings

log = logging.getLogger("cadence.alerts")


def sweep(db: Database, settings: Settings, *, now: datetime | None = None) -> dict[str, int]:
    """Evaluate every pipeline with a rule that has unjudged runs (or has not been
    evaluated for ``alert_reevaluate_seconds``): {pipeline: notifications queued}. A
    pipeline whose evaluation fails is logged and left unjudged for the next sweep."""
    now = now or utcnow()
    judged_since = now - timedelta(seconds=settings.alert_reevaluate_seconds)
    with db.read_latest() as session:
        names = repository.unjudged_pipelines(session, evaluated_before=judged_since)
    queued = {}
    for name in names:
        try:
            queued[name] = len(
                evaluate(db, settings, name, now=now, unless_judged_since=judged_since)
            )
        except NotFound:  # deleted since the list was read
            continue
        except Exception as exc:  # the database is away, a lock timed out: next sweep
            first_line = (str(exc).splitlines() or [type(exc).__name__])[0][:200]
            log.warning("alert sweep could not evaluate %s: %s", name, first_line)
    if any(queued.values()):
        log.info("alert sweep: %s", ", ".join(f"{n} {q}" for n, q in queued.items() if q))
    return queued


def record(db: Database) -> int:
    """This month's forecast stored for the next pipelines that have none (a failure is
    logged and retried at the next wake); how many were stored."""
    try:
        return record_months(db)
    except Exception as exc:  # the database is away, a lock timed out: next wake
        first_line = (str(exc).splitlines() or [type(exc).__name__])[0][:200]
        log.warning("forecast record could not store this month's forecasts: %s", first_line)
        return 0


class Sweeper:
    """The sweeper thread of one process; ``start`` and ``stop`` from the lifespan."""

    def __init__(self, db: Database, settings: Settings) -> None:
        self.db = db
        self.settings = settings
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name="cadence-alert-sweeper", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(timeout=self.settings.alert_webhook_timeout_seconds + 5)

    def _run(self) -> None:
        while not self.stopping.is_set():  # at start-up first: what a dead process left
            try:
                sweep(self.db, self.settings)
            except Exception as exc:  # the database is away: try again at the next sweep
                first_line = (str(exc).splitlines() or [type(exc).__name__])[0][:200]
                log.warning("alert sweep could not read the rules: %s", first_line)
            record(self.db)
            self.stopping.wait(self.settings.alert_sweep_seconds)
