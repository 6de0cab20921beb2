"""Storing and reading evaluations. Services flush; the session dependency commits."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

from sqlalchemy.orm import Session

from app.auth.service import TokenInfo, check_pipeline_allowed
from app.db.engine import WriteSession
from app.db.models import Pipeline
from app.evaluations import repository
from app.evaluations.schemas import EvaluationBatchOut, EvaluationIn, EvaluationOut, EvaluationPage
from app.exceptions import Conflict, Invalid
from app.pipelines.service import get_by_name
from app.planning.decay import QualityPoint
from app.runs.listing import decode_cursor, encode_cursor

WEEK_SECONDS = 7 * 24 * 3600.0
MAX_LIST_LIMIT = 1000


def age_weeks(evaluated_at: datetime, finished_at: datetime) -> float:
    return (evaluated_at - finished_at).total_seconds() / WEEK_SECONDS


def _key_of(item: EvaluationIn, run_pk: int, metric: str) -> repository.Key:
    return run_pk, item.evaluated_at.astimezone(UTC), metric


def ingest(
    session: WriteSession, name: str, items: list[EvaluationIn], *, token: TokenInfo | None
) -> EvaluationBatchOut:
    """Store evaluations all or nothing; identical retries are no-ops, changed values 409.

    Checked per item (422 naming ``evaluations.<i>.<field>``): the run exists in this
    pipeline, the evaluation is not before the run finished, the metric is the
    pipeline's. Values are finite (the schema refuses NaN and Infinity).
    """
    if token is not None:
        check_pipeline_allowed(token, name)
    pipeline = get_by_name(session, name)
    runs = repository.runs_by_run_id(session, pipeline.id, [i.run_id for i in items])
    keys = _validate(pipeline, items, runs)
    existing = repository.stored(session, keys)
    _check_conflicts(items, keys, existing)
    fresh = {k: i for i, k in zip(items, keys, strict=True) if k not in existing}
    repository.insert_new(
        session,
        [
            {
                "pipeline_id": pipeline.id,
                "run_pk": k[0],
                "evaluated_at": k[1],
                "metric": k[2],
                "value": item.value,
            }
            for k, item in fresh.items()
        ],
    )
    rows = repository.stored(session, keys)
    _check_conflicts(items, keys, rows)  # a racing request may have stored other values
    out = [
        _out(rows[k], item.run_id, runs[item.run_id][1])
        for item, k in zip(items, keys, strict=True)
    ]
    created = len(fresh)
    return EvaluationBatchOut(created=created, existing=len(set(keys)) - created, evaluations=out)


def _validate(
    pipeline: Pipeline, items: list[EvaluationIn], runs: dict[str, tuple[int, datetime]]
) -> list[repository.Key]:
    fields: list[dict[str, str]] = []
    keys: list[repository.Key] = []
    first: dict[repository.Key, int] = {}
    for i, item in enumerate(items):
        where = f"evaluations.{i}."
        metric = item.metric or pipeline.quality_metric
        if metric != pipeline.quality_metric:
            fields.append(
                {
                    "field": where + "metric",
                    "reason": (
                        f"pipeline {pipeline.name!r} measures {pipeline.quality_metric!r}, not "
                        f"{metric!r} (PUT the pipeline's quality_metric to change it)"
                    ),
                }
            )
        found = runs.get(item.run_id)
        if found is None:
            fields.append(
                {
                    "field": where + "run_id",
                    "reason": (
                        f"no run {item.run_id!r} in pipeline {pipeline.name!r}: "
                        "post the run first (POST /api/v1/runs)"
                    ),
                }
            )
            keys.append((-1, item.evaluated_at, metric))
            continue
        pk, finished = found
        if item.evaluated_at < finished:
            fields.append(
                {
                    "field": where + "evaluated_at",
                    "reason": (
                        f"{item.evaluated_at.isoformat()} is before run {item.run_id!r} finished "
                        f"({finished.isoformat()}); a model is evaluated once it exists"
                    ),
                }
            )
        key = _key_of(item, pk, metric)
        if key in first and not math.isclose(items[first[key]].value, item.value):
            fields.append(
                {
                    "field": where + "value",
                    "reason": (f"repeats evaluations.{first[key]} with a different value"),
                }
            )
        first.setdefault(key, i)
        keys.append(key)
    if fields:
        summary = "; ".join(f"{f['field']}: {f['reason']}" for f in fields[:5])
        raise Invalid(f"invalid evaluations: {summary}", fields=fields)
    return keys


def _check_conflicts(items: list[EvaluationIn], keys: list[Any], stored: dict[Any, Any]) -> None:
    fields = [
        {"field": f"evaluations.{i}.value", "reason": f"stored as {stored[k].value!r}"}
        for i, (item, k) in enumerate(zip(items, keys, strict=True))
        if k in stored and not math.isclose(stored[k].value, item.value, rel_tol=1e-12)
    ]
    if fields:
        raise Conflict(
            "evaluations of the same run, time and metric exist with different values: "
            + ", ".join(f["field"] for f in fields[:5]),
            fields=fields,
        )


def _out(row: Any, run_id: str, finished_at: datetime) -> EvaluationOut:
    return EvaluationOut(
        id=row.id,
        run_id=run_id,
        evaluated_at=row.evaluated_at,
        metric=row.metric,
        value=row.value,
        age_weeks=age_weeks(row.evaluated_at, finished_at),
        created_at=row.created_at,
    )


def list_page(
    session: Session, name: str, *, run_id: str | None, cursor: str | None, limit: int
) -> EvaluationPage:
    pipeline = get_by_name(session, name)
    after = decode_cursor(cursor) if cursor else None
    rows = repository.page(session, pipeline.id, run_id=run_id, after=after, limit=limit + 1)
    page = rows[:limit]
    last = page[-1][0] if page and len(rows) > limit else None
    return EvaluationPage(
        evaluations=[_out(r[0], r[1], r[2]) for r in page],
        next_cursor=encode_cursor(SimpleNamespace(started_at=last.evaluated_at, id=last.id))
        if last is not None
        else None,
    )


def quality_points(session: Session, pipeline: Pipeline) -> list[QualityPoint]:
    """(age in weeks, value) of the pipeline's evaluations of its quality metric."""
    return quality_points_of(session, pipeline.id, pipeline.quality_metric)


def curve_stamps(
    session: Session, pipeline_ids: Sequence[int] | None
) -> dict[int, tuple[Any, ...]]:
    """What each pipeline's value curve depends on (``repository.curve_stamps``): only
    pipelines with a quality value and evaluations of their metric appear."""
    return repository.curve_stamps(session, pipeline_ids)


def quality_points_of(session: Session, pipeline_id: int, metric: str) -> list[QualityPoint]:
    """:func:`quality_points` by id and metric (the org plan reads them for a few)."""
    return [
        QualityPoint(age_weeks(at, finished), value)
        for at, finished, value in repository.ages_and_values(session, pipeline_id, metric)
    ]
