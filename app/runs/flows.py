"""Ingestion as a flow across features, in its order: check the runs, create the
pipelines they name that do not exist (``app.pipelines.service``), store the runs, add
them to the rollups, then, once the answer is sent, evaluate the alert rules.

The router parses and answers what this module returns; this module says what happens,
in which unit of work, and what follows once the answer is sent. Each step runs in the
caller's worker thread (one hop per request: see ``app.runs.router``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from http import HTTPStatus

from app.alerts.service import evaluate_after_ingest, pipelines_with_rules
from app.auth.service import TokenInfo
from app.db.bill_marks import RESOURCE_TAG
from app.db.engine import Database, WriteSession
from app.pipelines import service as pipelines
from app.runs import service
from app.runs.schemas import RunBatchIn, RunIn
from app.settings import Settings

# What to run after the response has been sent (None: nothing to do).
FollowUp = Callable[[], None] | None


@dataclass(frozen=True, slots=True)
class Answer:
    """What an ingest request answers: the JSON body, its status (201 when it stored a
    run, 200 for a retry), the runs created and already stored, and the follow-up."""

    body: bytes | str
    status: int
    created: int
    existing: int
    follow_up: FollowUp


def record_run(db: Database, run: RunIn, token: TokenInfo, settings: Settings) -> Answer:
    """Store one run. On PostgreSQL a new run of a known pipeline is one statement that
    commits alone; anything else (a new pipeline, a retry, a conflict, SQLite) takes
    :func:`store_runs` in a transaction.
    """
    result = None
    # A running attempt takes the general path (its rollup terms wait for its finish),
    # so does resumed progress (checked against the earlier attempts), and so does a run
    # that names a cloud resource (it marks the bill's kept totals: app/db/bill_marks.py).
    general = run.outcome == "running" or run.resumed_from_hours or RESOURCE_TAG in run.tags
    if not db.is_sqlite and not general:
        service.check_one(run, token, settings)  # (the general path checks again: a few us)
        with db.one_statement() as cursor:
            result = service.insert_new(cursor, run)
    if result is not None:
        stored = service.created_out(result)
    else:
        with db.write() as session:
            [result] = store_runs(session, [run], token=token, settings=settings, batch=False)
            stored = (
                service.created_out(result) if result.created else service.get(session, result.pk)
            )
    created = int(result.created)
    moved = created or result.completed
    follow_up = alert_follow_up(db, settings, [run.pipeline]) if moved else None
    status = HTTPStatus.CREATED if created else HTTPStatus.OK
    return Answer(stored.model_dump_json(), status, created, 1 - created, follow_up)


def record_batch(db: Database, batch: RunBatchIn, token: TokenInfo, settings: Settings) -> Answer:
    """Store a batch, all or nothing; the answer lists each run's outcome in order."""
    service.check_batch_size(batch.runs, settings)
    with db.write() as session:
        results = store_runs(session, batch.runs, token=token, settings=settings, batch=True)
    body, created, existing = service.batch_json(results)
    follow_up = alert_follow_up(
        db, settings, sorted({r.run.pipeline for r in results if r.created or r.completed})
    )
    status = HTTPStatus.CREATED if created else HTTPStatus.OK
    return Answer(body, status, created, existing, follow_up)


def store_runs(
    session: WriteSession,
    runs: list[RunIn],
    *,
    token: TokenInfo | None,
    settings: Settings,
    batch: bool,
) -> list[service.Ingested]:
    """Store runs all-or-nothing in the caller's unit of work: each run's outcome.

    Round trips: one pipeline look-up (for new pipelines, the creation check, an insert
    and a look-up), one insert for the runs, one for their interruptions, two rollup
    upserts; retries add one read of the stored runs.
    """
    checked = service.check(runs, token=token, settings=settings, batch=batch)
    named = pipelines.for_ingest(session, checked.named, token, settings)
    stored = service.store(session, checked, named)
    service.check_resumed(session, checked, named)
    service.roll_up(session, stored)
    return service.outcomes(checked, named, stored)


def alert_follow_up(db: Database, settings: Settings, names: list[str]) -> FollowUp:
    """Evaluate the alert rules of these pipelines after the response, if they have any."""
    with_rules = pipelines_with_rules(db, names)
    return partial(evaluate_after_ingest, db, settings, with_rules) if with_rules else None
