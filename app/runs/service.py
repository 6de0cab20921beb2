"""Ingesting and reading run records. Services flush; the session dependency commits."""

from __future__ import annotations

import base64
import binascii
import json
import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.orm import Session

from app.auth.service import check_pipeline_allowed
from app.db.models import ApiToken, Pipeline, Run
from app.errors import Conflict, Invalid, NotFound
from app.runs import repository
from app.runs.schemas import InterruptionOut, RunIn, RunOut
from app.runs.validation import cross_field_errors, interruption_values, stored_values
from app.settings import Settings

MAX_LIST_LIMIT = 1000
COMPARED = (
    "variant", "started_at", "finished_at", "workers", "gpu_type", "gpu_hours",
    "gpu_utilization", "price_per_gpu_hour", "quality_metric", "quality_value",
    "data_stall_hours", "checkpoint_hours", "scheduling_wait_hours", "mfu", "tags",
)  # fmt: skip


@dataclass
class Ingested:
    index: int
    run: RunIn
    pk: int
    created: bool


def ingest(
    session: Session,
    runs: list[RunIn],
    *,
    token: ApiToken | None,
    settings: Settings,
    batch: bool,
) -> list[Ingested]:
    """Store runs all-or-nothing. Identical retries are no-ops; changed retries are 409s."""
    prefix = (lambda i: f"runs.{i}.") if batch else (lambda i: "")
    _validate(runs, prefix)
    if token is not None:
        for name in sorted({r.pipeline for r in runs}):
            check_pipeline_allowed(token, name)

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
        {r.pipeline: _pipeline_defaults(r, settings) for r in runs},
    )
    unique = [runs[i] for i in first.values()]
    keys = [(pipelines[r.pipeline].id, r.run_id) for r in unique]
    existing = repository.runs_by_key(session, keys)
    _raise_conflicts(unique, pipelines, existing, prefix, first)

    # Insert in key order, so two batches that overlap lock rows in the same order.
    new = sorted(
        (r for r in unique if (pipelines[r.pipeline].id, r.run_id) not in existing),
        key=lambda r: (pipelines[r.pipeline].id, r.run_id),
    )
    values = [{"pipeline_id": pipelines[r.pipeline].id, **stored_values(r)} for r in new]
    ids = repository.insert_runs(session, values)
    raced = [r for r in new if (pipelines[r.pipeline].id, r.run_id) not in ids]
    if raced:  # another request stored these between our read and our insert
        won = repository.runs_by_key(session, [(pipelines[r.pipeline].id, r.run_id) for r in raced])
        _raise_conflicts(raced, pipelines, won, prefix, first)
        existing.update(won)
    repository.insert_interruptions(
        session,
        [
            {"run_pk": ids[(pipelines[r.pipeline].id, r.run_id)], **v}
            for r in new
            if (pipelines[r.pipeline].id, r.run_id) in ids
            for v in interruption_values(r)
        ],
    )
    session.flush()

    out = []
    for i, run in enumerate(runs):
        db_key = (pipelines[run.pipeline].id, run.run_id)
        created = db_key in ids and first[(run.pipeline, run.run_id)] == i
        pk = ids[db_key] if db_key in ids else existing[db_key].id
        out.append(Ingested(index=i, run=run, pk=pk, created=created))
    return out


def _validate(runs: list[RunIn], prefix: Any) -> None:
    fields = [
        {"field": prefix(i) + name, "reason": reason}
        for i, run in enumerate(runs)
        for name, reason in cross_field_errors(run)
    ]
    if fields:
        summary = "; ".join(f"{f['field']}: {f['reason']}" for f in fields[:5])
        raise Invalid(f"invalid run record: {summary}", fields=fields)


def _raise_conflicts(
    runs: list[RunIn],
    pipelines: dict[str, Pipeline],
    existing: dict[tuple[int, str], Run],
    prefix: Any,
    first: dict[tuple[str, str], int],
) -> None:
    fields = []
    for run in runs:
        row = existing.get((pipelines[run.pipeline].id, run.run_id))
        if row is None:
            continue
        differing = _differences(_row_values(row), row, run)
        if differing:
            index = first[(run.pipeline, run.run_id)]
            fields += [
                {"field": prefix(index) + name, "reason": "differs from the stored run"}
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


def _differences(stored: dict[str, Any], stored_source: Run | RunIn, incoming: RunIn) -> list[str]:
    new = stored_values(incoming)
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


def _pipeline_defaults(run: RunIn, settings: Settings) -> dict[str, Any]:
    return {
        "name": run.pipeline,
        "display_name": run.pipeline,
        "owner": "",
        "price_per_gpu_hour": settings.default_price_per_gpu_hour,
        "monthly_budget_usd": None,
        "runs_per_week": 1.0,
        "quality_metric": run.quality_metric or "quality",
        "higher_is_better": True,
    }


# Reading ------------------------------------------------------------------------------


def to_out(run: Run) -> RunOut:
    price = (
        run.price_per_gpu_hour
        if run.price_per_gpu_hour is not None
        else run.pipeline.price_per_gpu_hour
    )
    return RunOut(
        id=run.id,
        pipeline=run.pipeline.name,
        run_id=run.run_id,
        variant=run.variant,
        started_at=run.started_at,
        finished_at=run.finished_at,
        workers=run.workers,
        gpu_type=run.gpu_type,
        gpu_utilization=run.gpu_utilization,
        gpu_hours=run.gpu_hours,
        price_per_gpu_hour=run.price_per_gpu_hour,
        quality_metric=run.quality_metric or run.pipeline.quality_metric,
        quality_value=run.quality_value,
        data_stall_hours=run.data_stall_hours,
        checkpoint_hours=run.checkpoint_hours,
        scheduling_wait_hours=run.scheduling_wait_hours,
        mfu=run.mfu,
        interruptions=[InterruptionOut.model_validate(i) for i in run.interruptions],
        tags=run.tags,
        created_at=run.created_at,
        wall_clock_hours=run.wall_clock_hours,
        effective_price_per_gpu_hour=price,
        cost_usd=run.gpu_hours * price,
        idle_gpu_hours=(1.0 - run.gpu_utilization) * run.gpu_hours,
    )


def get(session: Session, pk: int) -> Run:
    row = repository.get_run(session, pk)
    if row is None:
        raise NotFound(f"no run with id {pk}")
    return row


def delete(session: Session, pk: int) -> None:
    session.delete(get(session, pk))
    session.flush()


def encode_cursor(run: Run) -> str:
    raw = json.dumps([run.started_at.isoformat(), run.id]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str) -> tuple[datetime, int]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        started, pk = json.loads(base64.urlsafe_b64decode(padded.encode()))
        return datetime.fromisoformat(started), int(pk)
    except (ValueError, TypeError, binascii.Error, json.JSONDecodeError) as exc:
        raise Invalid(
            "cursor is not one this server issued",
            fields=[{"field": "cursor", "reason": "malformed; pass next_cursor back unchanged"}],
        ) from exc
