"""Change a stored run's measurements (utilization and its source, MFU, stall and
checkpoint hours): all or nothing, audited, the rollups changed in the same transaction.

Everything that identifies, bills or schedules a run stays as ingested; what changes is
what a later reader measured (``cadence enrich prometheus`` reads DCGM after the run).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from sqlalchemy.orm import Session

from app.auth.service import TokenInfo, check_pipeline_allowed
from app.db.base import utcnow
from app.db.engine import WriteSession
from app.db.models import Run
from app.exceptions import Invalid, NotFound
from app.measurements import repository
from app.measurements.schemas import (
    MEASUREMENT_FIELDS,
    READING_FIELDS,
    MeasuredRun,
    MeasurementChangeOut,
    MeasurementChangesOut,
    MeasurementsIn,
    MeasurementsOut,
)

Edit = tuple[str, MeasurementsIn]  # (run_id, the fields sent)
Errors = list[dict[str, str]]


def update(
    session: WriteSession,
    pipeline: str,
    edits: Sequence[Edit],
    token: TokenInfo,
    *,
    single: bool = False,
) -> MeasurementsOut:
    """Apply the edits, or change nothing and raise (422 naming each field, 404)."""
    check_pipeline_allowed(token, pipeline)
    pid = repository.pipeline_id(session, pipeline)
    if pid is None:
        raise NotFound(f"no pipeline named {pipeline!r}")

    def prefix(i: int) -> str:
        return "" if single else f"runs.{i}."

    rows = repository.runs_by_run_id(session, pid, [run_id for run_id, _ in edits])
    errors: Errors = []
    seen: set[str] = set()
    planned: dict[int, dict[str, Any]] = {}
    answers: list[MeasuredRun] = []
    for i, (run_id, sent) in enumerate(edits):
        row = rows.get(run_id)
        if row is None:
            if single:
                raise NotFound(f"no run {run_id!r} in pipeline {pipeline!r}")
            errors.append(_error(prefix(i) + "run_id", f"no such run in pipeline {pipeline!r}"))
            continue
        if run_id in seen:
            errors.append(_error(prefix(i) + "run_id", "appears more than once in the batch"))
            continue
        seen.add(run_id)
        new, problems = _checked(row, sent, prefix(i))
        errors += problems
        changed = [f for f, v in new.items() if not _same(getattr(row, f), v)]
        if changed:
            planned[row.id] = {f: new[f] for f in changed}
        answers.append(MeasuredRun(id=row.id, run_id=run_id, changed=changed))
    if errors:
        raise Invalid(
            f"measurements refused: {errors[0]['field']}: {errors[0]['reason']}", fields=errors
        )
    audit = _audit(planned, rows, dict(edits), token.name)
    repository.change_runs(session, planned)
    repository.add_changes(session, audit)
    return MeasurementsOut(
        updated=len(planned), unchanged=len(answers) - len(planned), runs=answers
    )


def _audit(
    planned: dict[int, dict[str, Any]],
    rows: dict[str, Run],
    sent: dict[str, MeasurementsIn],
    by: str,
) -> list[dict[str, Any]]:
    """The audit rows of the planned changes: each changed field's old and new value,
    and the coverage and note sent with a utilization, all at one time (a reading's
    rows are told apart by it: app/planning/utilization_readings.py)."""
    at = utcnow()
    by_pk = {row.id: row for row in rows.values()}
    sent_by_pk = {rows[run_id].id: fields for run_id, fields in sent.items()}
    return [
        {
            "run_pk": pk,
            "changed_by": by,
            "field": f,
            "old_value": _shown(getattr(by_pk[pk], f)) if f in MEASUREMENT_FIELDS else None,
            "new_value": _shown(value),
            "created_at": at,
        }
        for pk, values in planned.items()
        for f, value in {**values, **_reading(values, sent_by_pk[pk])}.items()
    ]


def _reading(changed: dict[str, Any], sent: MeasurementsIn) -> dict[str, Any]:
    """The coverage and note sent, recorded with a change of the utilization they
    describe (``cadence enrich prometheus`` sends both)."""
    if not {"gpu_utilization", "utilization_source"} & set(changed):
        return {}
    return {f: getattr(sent, f) for f in READING_FIELDS if getattr(sent, f) is not None}


def _checked(row: Run, sent: MeasurementsIn, prefix: str) -> tuple[dict[str, Any], Errors]:
    """The fields sent, and the reasons any of them cannot be stored on this run."""

    def name(field: str) -> str:
        return prefix + field

    given = [f for f in MEASUREMENT_FIELDS if f in sent.model_fields_set]
    if not given:
        return {}, [_error(prefix.rstrip(".") or "body", _NOTHING)]
    described = {"gpu_utilization", "utilization_source"} & set(given)
    for f in READING_FIELDS:
        if f in sent.model_fields_set and not described:
            return {}, [_error(name(f), "describes a utilization: send gpu_utilization with it")]
    if row.outcome == "running":  # its measurements come with its finish (POST /api/v1/runs)
        return {}, [_error(name("run_id"), "the attempt is still running: post its finish")]
    new = {f: getattr(sent, f) for f in given}
    errors: Errors = []
    for f in ("data_stall_hours", "checkpoint_hours"):
        if f in new and new[f] is None:
            errors.append(_error(name(f), "must be a number of hours (0 for none)"))
    if (
        "gpu_utilization" in new
        and new["gpu_utilization"] is None
        and not _nullable("gpu_utilization")
    ):
        errors.append(_error(name("gpu_utilization"), "must be a fraction between 0 and 1"))
    if errors:
        return new, errors
    stall = new.get("data_stall_hours", row.data_stall_hours)
    checkpoint = new.get("checkpoint_hours", row.checkpoint_hours)
    lost = row.lost_progress_hours + row.resume_hours + row.reschedule_hours
    hours = row.wall_clock_hours
    if stall + checkpoint + lost > hours * (1 + 1e-9):
        field = "data_stall_hours" if "data_stall_hours" in new else "checkpoint_hours"
        errors.append(
            _error(
                name(field),
                f"stall ({stall:g} h) + checkpoint ({checkpoint:g} h) + interruption time "
                f"({lost:g} h) = {stall + checkpoint + lost:.4g} h is longer than the run "
                f"({hours:.4g} h)",
            )
        )
    return new, errors


_NOTHING = f"give at least one of {', '.join(MEASUREMENT_FIELDS)}"


def _nullable(field: str) -> bool:
    return bool(Run.__table__.c[field].nullable)


def _error(field: str, reason: str) -> dict[str, str]:
    return {"field": field, "reason": reason}


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float | int):
        return math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-12)
    return bool(a == b)


def _shown(value: Any) -> str | None:
    return None if value is None else (f"{value:g}" if isinstance(value, float) else str(value))


def changes(session: Session, name: str, run_id: str) -> MeasurementChangesOut:
    """The run's measurement audit, oldest first; a 404 for an unknown pipeline or run."""
    pipeline = repository.pipeline_id(session, name)
    pk = None if pipeline is None else repository.run_pk(session, pipeline, run_id)
    if pk is None:
        raise NotFound(f"no run {run_id[:200]!r} in pipeline {name!r}")
    rows = [
        MeasurementChangeOut(
            field=r.field,
            old_value=r.old_value,
            new_value=r.new_value,
            changed_by=r.changed_by,
            changed_at=r.created_at,
        )
        for r in repository.changes_of(session, pk)
    ]
    return MeasurementChangesOut(pipeline=name, run_id=run_id, changes=rows)
