"""Reading runs back: the API's keyset pages, the dashboard's sortable table and the CSV
export (the API's JSON values, column by column; ``cadence export`` uses the same
columns)."""

from __future__ import annotations

import base64
import binascii
import csv
import io
import json
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from cadence_client.spreadsheet import csv_value
from pydantic_core import to_jsonable_python
from sqlalchemy.orm import Session

from app.auth.service import TokenInfo, check_pipeline_allowed
from app.db.engine import Database
from app.exceptions import Invalid
from app.pipelines.service import get_by_name
from app.runs import repository
from app.runs.output import out_dict, to_out
from app.runs.schemas import RunOut
from app.schemas_common import in_range_utc

MAX_LIST_LIMIT = 1000
CSV_COLUMNS = list(RunOut.model_fields)
SORTS = tuple(repository.SORTS)


def table_page(
    session: Session,
    pipeline_id: int,
    *,
    sort: str,
    descending: bool,
    number: int,
    size: int,
) -> list[RunOut]:
    """One page of the runs table (1-based ``number``); the page knows the total."""
    rows = repository.sorted_runs(
        session,
        pipeline_id,
        sort=sort,
        descending=descending,
        offset=(number - 1) * size,
        limit=size,
    )
    return [to_out(*r) for r in rows]


def csv_rows(db: Database, pipeline_id: int, chunk: int = 1000) -> Iterator[str]:
    """The header, then every run of the pipeline newest first, read in keyset pages."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    after = None
    while True:
        with db.read() as session:
            rows = repository.list_runs(session, pipeline_id=pipeline_id, after=after, limit=chunk)
            outs = [to_jsonable_python(out_dict(*r)) for r in rows]
        for data in outs:  # the JSON values of GET /api/v1/runs, column by column
            writer.writerow([csv_value(data[c]) for c in CSV_COLUMNS])
        yield buffer.getvalue()
        buffer.seek(0)
        buffer.truncate()
        if len(rows) < chunk:
            return
        after = (rows[-1][0].started_at, rows[-1][0].id)


def list_page(
    session: Session,
    *,
    viewer: TokenInfo | None,
    pipeline: str | None,
    variant: str | None,
    since: datetime | None,
    until: datetime | None,
    cursor: str | None,
    limit: int,
) -> dict[str, Any]:
    """One page of runs, newest first, as the API's JSON (``runs``, ``next_cursor``);
    a viewer's pipeline limit narrows it (naming another pipeline is a 403)."""
    after = decode_cursor(cursor) if cursor else None
    if pipeline:
        check_pipeline_allowed(viewer, pipeline)
    pipeline_id = get_by_name(session, pipeline).id if pipeline else None
    rows = repository.list_runs(
        session,
        pipeline_id=pipeline_id,
        only=viewer.pipelines if viewer is not None and not pipeline else None,
        variant=variant,
        since=since,
        until=until,
        after=after,
        limit=limit + 1,
    )
    page = rows[:limit]
    more = len(rows) > limit
    return {
        "runs": [out_dict(*r) for r in page],
        "next_cursor": encode_cursor(page[-1][0]) if more and page else None,
    }


def encode_cursor(run: Any) -> str:
    raw = json.dumps([run.started_at.isoformat(), run.id]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


MAX_CURSOR_CHARS = 200  # ours are ~60; a longer one is not ours
MAX_PK = 2**63 - 1  # BIGINT: a larger id made the database raise (a 500)


def bad_cursor() -> Invalid:
    return Invalid(
        "cursor is not one this server issued",
        fields=[{"field": "cursor", "reason": "malformed; pass next_cursor back unchanged"}],
    )


def decode_cursor(cursor: str) -> tuple[datetime, int]:
    """(started_at in UTC, id) of a cursor from :func:`encode_cursor`; a 422 naming
    ``cursor`` for anything else. Crafted cursors once reached the query: ``Infinity``
    as the id (OverflowError), ids beyond BIGINT, naive or year-0 timestamps."""
    if len(cursor) > MAX_CURSOR_CHARS:
        raise bad_cursor()
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        started, pk = json.loads(base64.urlsafe_b64decode(padded.encode()))
        when = datetime.fromisoformat(started)
    except (ValueError, TypeError, binascii.Error, RecursionError) as exc:
        raise bad_cursor() from exc
    utc = in_range_utc(when) if when.tzinfo is not None else None
    if utc is None or type(pk) is not int or not 0 < pk <= MAX_PK:
        raise bad_cursor()
    return utc, pk
