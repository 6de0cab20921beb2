"""The runs table (sortable, paginated) and the CSV export, which matches the API's JSON.

The same columns serve the dashboard's download and ``cadence export``."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from typing import Any

from pydantic_core import to_jsonable_python
from sqlalchemy.orm import Session

from app.db.engine import Database
from app.runs import repository, service
from app.runs.schemas import RunOut

CSV_COLUMNS = list(RunOut.model_fields)
SORTS = tuple(repository.SORTS)


def table_page(
    session: Session, pipeline_id: int, *, sort: str, descending: bool, number: int, size: int
) -> tuple[list[RunOut], int]:
    """One page of the runs table (1-based ``number``) and the total count."""
    total = repository.count_runs(session, pipeline_id)
    ids = repository.sorted_run_ids(
        session,
        pipeline_id,
        sort=sort,
        descending=descending,
        offset=(number - 1) * size,
        limit=size,
    )
    return [service.to_out(*r) for r in repository.load_runs(session, ids)], total


def csv_value(value: Any) -> str:
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
        with db.read() as session:
            rows = repository.list_runs(session, pipeline_id=pipeline_id, after=after, limit=chunk)
            outs = [to_jsonable_python(service.out_dict(*r)) for r in rows]
        for data in outs:  # the JSON values of GET /api/v1/runs, column by column
            writer.writerow([csv_value(data[c]) for c in CSV_COLUMNS])
        yield buffer.getvalue()
        buffer.seek(0)
        buffer.truncate()
        if len(rows) < chunk:
            return
        after = (rows[-1][0].started_at, rows[-1][0].id)
