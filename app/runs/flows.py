"""Ingestion as a flow across features: store the runs, then evaluate the alert rules.

The router parses and answers; this module says what happens, in which unit of work,
and what follows once the answer is sent. Each step runs in the caller's worker thread
(one hop per request: see ``app.runs.router``).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from app.alerts.service import evaluate_after_ingest, pipelines_with_rules
from app.auth.service import TokenInfo
from app.db.engine import Database
from app.runs import service
from app.runs.schemas import RunBatchIn, RunIn, RunOut
from app.settings import Settings

# What to run after the response has been sent (None: nothing to do).
FollowUp = Callable[[], None] | None


def record_run(
    db: Database, run: RunIn, token: TokenInfo, settings: Settings
) -> tuple[RunOut, bool, FollowUp]:
    """Store one run: (the stored run, whether it was new, the follow-up).

    On PostgreSQL a new run of a known pipeline is one statement that commits alone;
    anything else (a new pipeline, a retry, a conflict, SQLite) takes the general
    path in a transaction.
    """
    result = None
    if not db.is_sqlite:
        service.check_one(run, token, settings)  # (the general path checks again: a few us)
        with db.one_statement() as cursor:
            result = service.insert_new(cursor, run)
    if result is not None:
        stored = service.created_out(result)
    else:
        with db.write() as session:
            [result] = service.ingest(session, [run], token=token, settings=settings, batch=False)
            stored = (
                service.created_out(result) if result.created else service.get(session, result.pk)
            )
    follow_up = alert_follow_up(db, settings, [run.pipeline]) if result.created else None
    return stored, result.created, follow_up


def record_batch(
    db: Database, batch: RunBatchIn, token: TokenInfo, settings: Settings
) -> tuple[list[service.Ingested], FollowUp]:
    """Store a batch, all or nothing: each run's outcome, in the batch's order, and the
    follow-up."""
    with db.write() as session:
        results = service.ingest(session, batch.runs, token=token, settings=settings, batch=True)
    names = sorted({r.run.pipeline for r in results if r.created})
    return results, alert_follow_up(db, settings, names)


def alert_follow_up(db: Database, settings: Settings, names: list[str]) -> FollowUp:
    """Evaluate the alert rules of these pipelines after the response, if they have any."""
    with_rules = pipelines_with_rules(db, names)
    return partial(evaluate_after_ingest, db, settings, with_rules) if with_rules else None
