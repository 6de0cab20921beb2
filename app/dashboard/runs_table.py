"""The runs table (sortable, paginated) and its CSV export, which matches the API's JSON."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from typing import Any

from pydantic_core import to_jsonable_python
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.analytics.repository import effective_price
from app.db.engine import Database
from app.db.models import Pipeline, Run
from app.runs import repository, service
from app.runs.schemas import RunOut
from app.spreadsheet import cell_from_text

SORTS: dict[str, Any] = {
    "started_at": Run.started_at,
    "variant": Run.variant,
    "workers": Run.workers,
    "gpu_hours": Run.gpu_hours,
    "gpu_utilization": Run.gpu_utilization,
    "quality_value": Run.quality_value,
    "cost_usd": Run.gpu_hours * effective_price(),
}
PAGE_SIZES = (25, 50, 100)
CSV_COLUMNS = list(RunOut.model_fields)


def page(
    session: Session, pipeline: Pipeline, *, sort: str, descending: bool, number: int, size: int
) -> tuple[list[RunOut], int]:
    """One page of runs (1-based ``number``) and the total count."""
    key = SORTS[sort]
    order = [key.desc() if descending else key.asc(), Run.id.desc() if descending else Run.id]
    total = session.scalar(select(func.count()).where(Run.pipeline_id == pipeline.id)) or 0
    ids = list(session.scalars(
        select(Run.id).join(Pipeline, Pipeline.id == Run.pipeline_id)
        .where(Run.pipeline_id == pipeline.id).order_by(*order)
        .offset((number - 1) * size).limit(size)
    ))  # fmt: skip
    return [service.to_out(*r) for r in repository.load_runs(session, ids)], int(total)


def csv_value(value: Any) -> str:
    """A JSON value as a CSV cell; text that a spreadsheet would run as a formula is
    marked as text (``app.spreadsheet``). Used by the download and ``cadence export``."""
    if isinstance(value, str):
        return cell_from_text(value)
    if value is None:
        return ""
    if isinstance(value, list | dict):
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    if hasattr(value, "isoformat"):
        return str(value.isoformat())
    return str(value)


def csv_rows(db: Database, pipeline_id: int, chunk: int = 1000) -> Iterator[str]:
    """The header, then every run of the pipeline newest first, read in keyset pages."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    after = None
    while True:
        with db.transaction(write=False) as session:
            rows = repository.list_runs(
                session,
                pipeline_id=pipeline_id,
                variant=None,
                since=None,
                until=None,
                after=after,
                limit=chunk,
            )
            outs = [to_jsonable_python(service.out_dict(*r)) for r in rows]
        for data in outs:  # the JSON values of GET /api/v1/runs, column by column
            writer.writerow([csv_value(data[c]) for c in CSV_COLUMNS])
        yield buffer.getvalue()
        buffer.seek(0)
        buffer.truncate()
        if len(rows) < chunk:
            return
        after = (rows[-1][0].started_at, rows[-1][0].id)
