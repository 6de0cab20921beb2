"""Ingesting and reading run records. Services flush; the unit of work the router opens commits."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

from sqlalchemy.orm import Session

from app.auth.service import TokenInfo, check_pipeline_allowed
from app.db import rollup
from app.db.base import utcnow
from app.db.engine import WriteSession
from app.db.models import Run
from app.exceptions import Conflict, Invalid, NotFound
from app.pipelines.service import check_creation
from app.runs import repository
from app.runs.output import ROW_FIELDS, to_out
from app.runs.repository import PipelineRef
from app.runs.schemas import RunIn, RunOut
from app.runs.validation import (
    cross_field_errors,
    future_start_error,
    interruption_values,
    stored_values,
)
from app.settings import Settings

COMPARED = (
    "variant",
    "started_at",
    "finished_at",
    "workers",
    "gpu_type",
    "outcome",
    "retraining_id",
    "gpu_hours",
    "gpu_utilization",
    "utilization_source",
    "price_per_gpu_hour",
    "quality_metric",
    "quality_value",
    "data_stall_hours",
    "checkpoint_hours",
    "scheduling_wait_hours",
    "mfu",
    "tags",
)


@dataclass
class Ingested:
    index: int
    run: RunIn
    pk: int
    created: bool
    pipeline: PipelineRef
    created_at: datetime | None = None


def ingest(
    session: WriteSession,
    runs: list[RunIn],
    *,
    token: TokenInfo | None,
    settings: Settings,
    batch: bool,
) -> list[Ingested]:
    """Store runs all-or-nothing. Identical retries are no-ops; changed retries are 409s.

    Round trips: one pipeline look-up (plus an insert for new pipelines), one
    ``INSERT ... ON CONFLICT DO NOTHING RETURNING`` for the runs, one insert for their
    interruptions. Only runs the insert skipped (retries) are read back and compared.
    """
    prefix = (lambda i: f"runs.{i}.") if batch else (lambda i: "")
    _check(runs, token, prefix, settings)

    # The first occurrence of a (pipeline, run_id) in a batch wins; later identical
    # copies are retries, later different copies are errors.
    first: dict[tuple[str, str], int] = {}
    for i, run in enumerate(runs):
        key = (run.pipeline, run.run_id)
        if key in first:
            differing = _differences(stored_values(runs[first[key]]), runs[first[key]], run)
            if differing:
                raise Invalid(
                    f"runs.{i} repeats run_id {run.run_id!r} of runs.{first[key]} "
                    f"with different {', '.join(differing)}",
                    fields=[{"field": f"runs.{i}.run_id", "reason": "duplicate in batch"}],
                )
        else:
            first[key] = i

    pipelines = repository.ensure_pipelines(
        session,
        (r.pipeline for r in runs),
        {r.pipeline: _pipeline_defaults(r, settings, token) for r in runs},
        lambda missing: _may_create(session, missing, runs, token, settings, prefix),
    )
    # Insert in key order, so two batches that overlap lock rows in the same order.
    unique = sorted(
        (runs[i] for i in first.values()), key=lambda r: (pipelines[r.pipeline].id, r.run_id)
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
    if skipped:  # retries (or a racing request that stored them first): same body or 409
        existing = repository.runs_by_key(
            session, [(pipelines[r.pipeline].id, r.run_id) for r in skipped]
        )
        _raise_conflicts(skipped, pipelines, existing, prefix, first)
    rollup.add_runs(session, [pk for pk, _ in inserted.values()])
    repository.insert_interruptions(
        session,
        [
            {"run_pk": inserted[(pipelines[r.pipeline].id, r.run_id)][0], **v}
            for r in unique
            if (pipelines[r.pipeline].id, r.run_id) in inserted
            for v in interruption_values(r)
        ],
    )

    out = []
    for i, run in enumerate(runs):
        pipeline = pipelines[run.pipeline]
        db_key = (pipeline.id, run.run_id)
        if db_key in inserted:
            pk, created_at = inserted[db_key]
            created = first[(run.pipeline, run.run_id)] == i
        else:
            pk, created_at, created = existing[db_key].id, existing[db_key].created_at, False
        out.append(Ingested(i, run, pk, created, pipeline, created_at))
    return out


def billed_price(run: RunIn, pipeline: PipelineRef) -> float:
    """The price frozen on a run when it is stored: its own, else the pipeline's now."""
    if run.price_per_gpu_hour is not None:
        return run.price_per_gpu_hour
    return pipeline.price_per_gpu_hour


def check_one(run: RunIn, token: TokenInfo | None, settings: Settings) -> None:
    """What :func:`ingest` checks first, for one run: call it before :func:`insert_new`,
    so that a refused run never holds a pooled connection."""
    _check([run], token, lambda i: "", settings)


def insert_new(cursor: Any, run: RunIn) -> Ingested | None:
    """The common case on PostgreSQL, a new run of a known pipeline, in one statement
    that commits alone (``Database.one_statement``); the run has passed
    :func:`check_one`.

    None sends the run down the general path (:func:`ingest`), and nothing was written:
    a new pipeline, or a run_id that exists (an identical retry, or a conflict to name).
    """
    found = repository.insert_one_pg(
        cursor, run.pipeline, stored_values(run), interruption_values(run)
    )
    if found is None:
        return None
    pipeline, pk, created_at = found
    return None if pk is None else Ingested(0, run, pk, True, pipeline, created_at)


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
        "finished_at": item.run.finished_at.astimezone(UTC),
        "created_at": item.created_at or utcnow(),
    }
    interruptions = [SimpleNamespace(**v) for v in interruption_values(item.run)]
    return to_out(tuple(values[name] for name in ROW_FIELDS), interruptions)


def _check(runs: list[RunIn], token: TokenInfo | None, prefix: Any, settings: Settings) -> None:
    """What the schemas cannot check, and the token's pipeline limit."""
    _validate(runs, prefix, utcnow(), settings.run_future_tolerance_hours)
    if token is not None:
        for name in sorted({r.pipeline for r in runs}):
            check_pipeline_allowed(token, name)


def _validate(runs: list[RunIn], prefix: Any, now: datetime, future_hours: float) -> None:
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


def _raise_conflicts(
    runs: list[RunIn],
    pipelines: dict[str, PipelineRef],
    existing: dict[tuple[int, str], Run],
    prefix: Any,
    first: dict[tuple[str, str], int],
) -> None:
    fields = []
    for run in runs:
        row = existing.get((pipelines[run.pipeline].id, run.run_id))
        if row is None:
            continue
        metric = pipelines[run.pipeline].quality_metric
        stored = _row_values(row)
        differing = _differences(stored, row, run, default_metric=metric)
        if differing:
            index = first[(run.pipeline, run.run_id)]
            fields += [
                {"field": prefix(index) + name, "reason": _conflict_reason(name, stored, run)}
                for name in differing
            ]
            message = (
                f"run {run.run_id!r} of pipeline {run.pipeline!r} already exists with different "
                f"{', '.join(differing)}; use a new run_id, or DELETE the old run first"
            )
    if fields:
        raise Conflict(
            message
            if len(runs) == 1
            else "some runs already exist with different values: " + message,
            fields=fields,
        )


def _row_values(row: Run) -> dict[str, Any]:
    return {name: getattr(row, name) for name in COMPARED}


def _conflict_reason(name: str, stored: dict[str, Any], run: RunIn) -> str:
    """Why a field conflicts, in terms of what was sent: a field the retry left out takes
    its default, which is not what the stored run holds (a 409 naming a field nobody sent
    would otherwise read as a server mistake)."""
    if name == "interruptions" or name not in stored:
        return "differs from the stored run"
    was = stored[name]
    if name not in run.model_fields_set and name in RunIn.model_fields:
        return (
            f"not sent, so it defaults to {stored_values(run).get(name)!r}, but the stored "
            f"run has {was!r}: send the stored value, or use a new run_id"
        )
    return f"the stored run has {was!r}; this request sends {stored_values(run).get(name)!r}"


def _differences(
    stored: dict[str, Any],
    stored_source: Run | RunIn,
    incoming: RunIn,
    default_metric: str | None = None,
) -> list[str]:
    """Names of the fields whose stored and incoming values differ.

    A run stored without a quality metric is shown with its pipeline's; sending that
    shown value back (an export re-imported) is the same run, not a conflict.
    """
    new = stored_values(incoming)
    if default_metric is not None:
        stored = {**stored, "quality_metric": stored["quality_metric"] or default_metric}
        new["quality_metric"] = new["quality_metric"] or default_metric
    differing = [name for name in COMPARED if not _same(stored[name], new[name])]
    old_interruptions = [
        (i.lost_progress_hours, i.resume_hours, i.reschedule_hours, i.cause)
        for i in stored_source.interruptions
    ]
    new_interruptions = [
        (i.lost_progress_hours, i.resume_hours, i.reschedule_hours, i.cause)
        for i in incoming.interruptions
    ]
    if len(old_interruptions) != len(new_interruptions) or not all(
        all(_same(a, b) for a, b in zip(x, y, strict=True))
        for x, y in zip(old_interruptions, new_interruptions, strict=True)
    ):
        differing.append("interruptions")
    return differing


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float | int):
        return math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-12)
    return bool(a == b)


def _may_create(
    session: Session,
    missing: list[str],
    runs: list[RunIn],
    token: TokenInfo | None,
    settings: Settings,
    prefix: Callable[[int], str],
) -> None:
    """Ingest creates unknown pipelines only when allowed, and within the token's rate."""
    first: dict[str, int] = {}
    for i, run in enumerate(runs):
        first.setdefault(run.pipeline, i)
    if not settings.auto_create_pipelines:
        shown = ", ".join(repr(n) for n in missing[:5]) + (", ..." if len(missing) > 5 else "")
        raise Invalid(
            f"no pipeline named {shown}, and ingest does not create pipelines "
            "(CADENCE_AUTO_CREATE_PIPELINES=false): an admin creates one with "
            "PUT /api/v1/pipelines/{name}",
            fields=[
                {"field": f"{prefix(first[n])}pipeline", "reason": "no such pipeline"}
                for n in missing
            ],
        )
    check_creation(session, missing, token, settings, field=f"{prefix(first[missing[0]])}pipeline")


def _pipeline_defaults(run: RunIn, settings: Settings, token: TokenInfo | None) -> dict[str, Any]:
    return {
        "name": run.pipeline,
        "display_name": run.pipeline,
        "owner": "",
        "price_per_gpu_hour": settings.default_price_per_gpu_hour,
        "monthly_budget_usd": None,
        "runs_per_week": 1.0,
        "quality_metric": run.quality_metric or "quality",
        "higher_is_better": True,
        "created_by_token_id": token.id if token is not None else None,
    }


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
