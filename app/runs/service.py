"""Ingesting and reading run records: each step of ingestion (``app.runs.flows`` sets
their order and opens the unit of work, which commits), reading a run, deleting one."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

from pydantic_core import to_json
from sqlalchemy.orm import Session

from app.auth.service import TokenInfo, check_pipeline_allowed
from app.db import rollup
from app.db.base import utcnow
from app.db.engine import WriteSession
from app.db.models import Run
from app.exceptions import Invalid, NotFound
from app.pipelines.service import Named, PipelineRef
from app.runs import completion, conflicts, repository
from app.runs.output import ROW_FIELDS, to_out
from app.runs.schemas import RunIn, RunOut
from app.runs.validation import (
    cross_field_errors,
    future_start_error,
    interruption_values,
    stored_values,
)
from app.settings import Settings


@dataclass
class Ingested:
    index: int
    run: RunIn
    pk: int
    created: bool
    pipeline: PipelineRef
    created_at: datetime | None = None
    completed: bool = False  # a running attempt this post finished


@dataclass(frozen=True, slots=True)
class Checked:
    """A request's runs once checked: where each (pipeline, run_id) first occurs (later
    identical copies are retries), and the pipelines they name."""

    runs: list[RunIn]
    prefix: Callable[[int], str]  # run i's field prefix in errors ("runs.3." in a batch)
    first: dict[tuple[str, str], int]
    named: dict[str, Named]


@dataclass(frozen=True, slots=True)
class Stored:
    """What :func:`store` wrote: {key: (id, created_at)}, the runs already stored, and
    the keys of the running attempts it completed."""

    inserted: dict[tuple[int, str], tuple[int, datetime]]
    existing: dict[tuple[int, str], Run]
    completed: frozenset[tuple[int, str]] = frozenset()


def check_batch_size(runs: list[RunIn], settings: Settings) -> None:
    if len(runs) > settings.max_batch_runs:
        raise Invalid(
            f"a batch holds at most {settings.max_batch_runs} runs; got {len(runs)}",
            fields=[{"field": "runs", "reason": f"more than {settings.max_batch_runs} items"}],
        )


def check(
    runs: list[RunIn], *, token: TokenInfo | None, settings: Settings, batch: bool
) -> Checked:
    """What the schemas cannot check, the token's pipeline limit, and copies of a run in
    a batch: the first occurrence of a (pipeline, run_id) wins; a later identical copy
    is a retry, a later different one an error."""
    prefix = _in_batch if batch else _alone
    _check(runs, token, prefix, settings)
    first: dict[tuple[str, str], int] = {}
    fields: dict[str, str] = {}
    for i, run in enumerate(runs):
        key = (run.pipeline, run.run_id)
        if key not in first:
            first[key] = i
            if run.pipeline not in fields:
                fields[run.pipeline] = f"{prefix(i)}pipeline"
        elif differing := conflicts.differences(
            stored_values(runs[first[key]]), runs[first[key]], run
        ):
            raise Invalid(
                f"runs.{i} repeats run_id {run.run_id!r} of runs.{first[key]} "
                f"with different {', '.join(differing)}",
                fields=[{"field": f"runs.{i}.run_id", "reason": "duplicate in batch"}],
            )
    # A new pipeline takes the metric of the last run that names it.
    metrics = {run.pipeline: run.quality_metric or "quality" for run in runs}
    named = {name: Named(field, metrics[name]) for name, field in fields.items()}
    return Checked(runs, prefix, first, named)


def store(session: WriteSession, checked: Checked, pipelines: dict[str, PipelineRef]) -> Stored:
    """Insert the runs and their interruptions; identical retries are no-ops, changed
    retries are 409s.

    One ``INSERT ... ON CONFLICT DO NOTHING RETURNING`` for the runs, one insert for
    their interruptions; only runs the insert skipped (retries) are read back and
    compared. Runs are inserted in key order, so two batches that overlap lock rows in
    the same order.
    """
    runs = checked.runs
    unique = sorted(
        (runs[i] for i in checked.first.values()),
        key=lambda r: (pipelines[r.pipeline].id, r.run_id),
    )
    values = [
        {
            "pipeline_id": pipelines[r.pipeline].id,
            **stored_values(r),
            "billed_price_per_gpu_hour": billed_price(r, pipelines[r.pipeline]),
        }
        for r in unique
    ]
    inserted = repository.insert_runs(session, values)
    skipped = [r for r in unique if (pipelines[r.pipeline].id, r.run_id) not in inserted]
    existing: dict[tuple[int, str], Run] = {}
    done: dict[tuple[int, str], Run] = {}
    if skipped:  # retries (or a racing request that stored them first): same body or 409
        existing = repository.runs_by_key(
            session, [(pipelines[r.pipeline].id, r.run_id) for r in skipped]
        )
        # A running attempt's finish completes it; its earlier copies in the batch too.
        done = completion.complete(session, skipped, pipelines, existing)
        rest = [r for r in skipped if (pipelines[r.pipeline].id, r.run_id) not in done]
        conflicts.raise_conflicts(
            rest,
            pipelines,
            existing,
            checked.prefix,
            checked.first,
            lambda pks: repository.measurements_changed(session, pks),
        )
    repository.insert_interruptions(
        session,
        [
            {"run_pk": inserted[(pipelines[r.pipeline].id, r.run_id)][0], **v}
            for r in unique
            if (pipelines[r.pipeline].id, r.run_id) in inserted
            for v in interruption_values(r)
        ],
    )
    return Stored(inserted, existing, frozenset(done))


def check_resumed(
    session: WriteSession, checked: Checked, pipelines: dict[str, PipelineRef]
) -> None:
    """A run's ``resumed_from_hours`` is at most the wall clock of the earlier attempts
    of its retraining (stored before, or in this request: read after the insert, in its
    transaction, so a refusal stores nothing)."""
    fields = []
    for i in checked.first.values():
        run = checked.runs[i]
        if not run.resumed_from_hours:
            continue
        retraining = run.retraining_id or run.run_id
        before = repository.earlier_attempt_hours(
            session, pipelines[run.pipeline].id, retraining, run.started_at
        )
        if run.resumed_from_hours > before * (1 + 1e-9) + 1e-9:
            reason = (
                f"{run.resumed_from_hours:g} h is more than the wall clock of the earlier "
                f"attempts of retraining {retraining!r} ({before:.4g} h)"
            )
            fields.append({"field": checked.prefix(i) + "resumed_from_hours", "reason": reason})
    if fields:
        summary = "; ".join(f"{f['field']}: {f['reason']}" for f in fields[:5])
        raise Invalid(f"invalid run record: {summary}", fields=fields)


def roll_up(session: WriteSession, stored: Stored) -> None:
    """Add the new runs to the rollups, in the transaction that stored them."""
    rollup.add_runs(session, [pk for pk, _ in stored.inserted.values()])


def outcomes(checked: Checked, pipelines: dict[str, PipelineRef], stored: Stored) -> list[Ingested]:
    """Each run's outcome, in the request's order: a copy of a run earlier in the same
    batch is "existing", as a retry is."""
    out = []
    for i, run in enumerate(checked.runs):
        pipeline = pipelines[run.pipeline]
        db_key = (pipeline.id, run.run_id)
        if db_key in stored.inserted:
            pk, created_at = stored.inserted[db_key]
            created = checked.first[(run.pipeline, run.run_id)] == i
        else:
            row = stored.existing[db_key]
            pk, created_at, created = row.id, row.created_at, False
        done = db_key in stored.completed and checked.first[(run.pipeline, run.run_id)] == i
        out.append(Ingested(i, run, pk, created, pipeline, created_at, done))
    return out


def batch_json(results: list[Ingested]) -> tuple[bytes, int, int]:
    """A batch's answer, a BatchOut, and its counts of created and existing runs.

    Built as plain dicts for pydantic-core: constructing 1,000 BatchItem models and
    dumping them cost 2.7 ms a batch, this 0.4 ms (the shape is held to BatchOut by
    tests/runs/test_batch_and_list.py).
    """
    created = sum(r.created for r in results)
    completed = sum(r.completed for r in results)
    existing = len(results) - created - completed
    items = [
        {
            "index": r.index,
            "id": r.pk,
            "run_id": r.run.run_id,
            "pipeline": r.run.pipeline,
            "status": "created" if r.created else "completed" if r.completed else "existing",
        }
        for r in results
    ]
    body = {"created": created, "existing": existing, "completed": completed, "runs": items}
    return to_json(body), created, existing


def billed_price(run: RunIn, pipeline: PipelineRef) -> float:
    """The price frozen on a run when it is stored: its own, else the pipeline's now."""
    if run.price_per_gpu_hour is not None:
        return run.price_per_gpu_hour
    return pipeline.price_per_gpu_hour


def check_one(run: RunIn, token: TokenInfo | None, settings: Settings) -> None:
    """What :func:`check` checks of one run that does not depend on the database: call
    it before :func:`insert_new`, so that a refused run never holds a pooled connection."""
    _check([run], token, _alone, settings)


def insert_new(cursor: Any, run: RunIn) -> Ingested | None:
    """The common case on PostgreSQL, a new run of a known pipeline, in one statement
    that commits alone (``Database.one_statement``); the run has passed
    :func:`check_one`.

    None sends the run down the general path (``app.runs.flows.store_runs``), and
    nothing was written:
    a new pipeline, or a run_id that exists (an identical retry, or a conflict to name).
    """
    found = repository.insert_one_pg(
        cursor, run.pipeline, stored_values(run), interruption_values(run)
    )
    if found is None:
        return None
    pipeline, pk, created_at = found
    return None if pk is None else Ingested(0, run, pk, True, PipelineRef(*pipeline), created_at)


def created_out(item: Ingested) -> RunOut:
    """The response for a run this request stored, built without reading it back: the
    stored values shaped like a row of ``repository._runs_query`` for :func:`to_out`."""
    values = {
        **stored_values(item.run),
        "id": item.pk,
        "pipeline": item.pipeline.name,
        "pipeline_price": item.pipeline.price_per_gpu_hour,
        "billed_price_per_gpu_hour": billed_price(item.run, item.pipeline),
        "pipeline_metric": item.pipeline.quality_metric,
        "started_at": item.run.started_at.astimezone(UTC),
        "finished_at": item.run.finished_at and item.run.finished_at.astimezone(UTC),
        "created_at": item.created_at or utcnow(),
    }
    interruptions = [SimpleNamespace(**v) for v in interruption_values(item.run)]
    return to_out(tuple(values[name] for name in ROW_FIELDS), interruptions)


def _in_batch(index: int) -> str:
    return f"runs.{index}."


def _alone(index: int) -> str:
    return ""


def _check(
    runs: list[RunIn], token: TokenInfo | None, prefix: Callable[[int], str], settings: Settings
) -> None:
    """What the schemas cannot check, and the token's pipeline limit."""
    _validate(runs, prefix, utcnow(), settings.run_future_tolerance_hours)
    if token is not None:
        for name in sorted({r.pipeline for r in runs}):
            check_pipeline_allowed(token, name)


def _validate(
    runs: list[RunIn], prefix: Callable[[int], str], now: datetime, future_hours: float
) -> None:
    fields = [
        {"field": prefix(i) + name, "reason": reason}
        for i, run in enumerate(runs)
        for name, reason in [
            *cross_field_errors(run),
            *filter(None, [future_start_error(run, now, future_hours)]),
        ]
    ]
    if fields:
        summary = "; ".join(f"{f['field']}: {f['reason']}" for f in fields[:5])
        raise Invalid(f"invalid run record: {summary}", fields=fields)


# Reading ------------------------------------------------------------------------------


def get(session: Session, pk: int, token: TokenInfo | None = None) -> RunOut:
    """The run, or 404; also 404 when it is outside the token's pipeline limit (a 403
    would tell the caller that the id exists)."""
    found = repository.get_run(session, pk)
    if found is None or (token is not None and not token.allows(found[0].pipeline)):
        raise NotFound(f"no run with id {pk}")
    return to_out(*found)


def run_count(session: Session, pipeline_id: int) -> int:
    return repository.count_runs(session, pipeline_id)


def delete(session: WriteSession, pk: int, token: TokenInfo | None = None) -> None:
    # Only the pipeline id is read: a row stored before timestamps were range-checked
    # (year 10000) may not load, and must still be deletable.
    pipeline_id = repository.run_pipeline_id(session, pk)
    if pipeline_id is None:
        raise NotFound(f"no run with id {pk}")
    if token is not None and not token.allows(repository.pipeline_name(session, pipeline_id)):
        raise NotFound(f"no run with id {pk}")
    repository.delete_run(session, pk)
