"""Run records in files: read JSON, JSON lines and CSV (for ``cadence report``) and write
CSV and JSON lines (for ``cadence export``).

Columns and keys are the API's field names. On the way in, the read-only columns of an
export (``id``, ``created_at`` and the derived ``wall_clock_hours``,
``effective_price_per_gpu_hour``, ``cost_usd``, ``idle_gpu_hours``) are dropped, so an
export can be reported again as it is. Every run keeps where it came from (``line 4``,
``item 2``) so the server's complaints can be pointed back at the file.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from cadence_client.spreadsheet import csv_value, text_from_cell

# The server's run fields (RunIn) and what a stored run adds (RunOut), in its order:
# tests/reporting/test_records_fields.py holds these to the server's schemas.
RUN_FIELDS = (
    "pipeline",
    "run_id",
    "variant",
    "started_at",
    "finished_at",
    "workers",
    "gpu_type",
    "outcome",
    "retraining_id",
    "gpu_utilization",
    "utilization_source",
    "gpu_hours",
    "price_per_gpu_hour",
    "quality_metric",
    "quality_value",
    "data_stall_hours",
    "checkpoint_hours",
    "scheduling_wait_hours",
    "mfu",
    "interruptions",
    "tags",
    "resumed_from_hours",
)
DERIVED_FIELDS = ("wall_clock_hours", "effective_price_per_gpu_hour", "cost_usd", "idle_gpu_hours")
READ_ONLY_FIELDS = frozenset({"id", "created_at", *DERIVED_FIELDS})
INT_FIELDS = frozenset({"workers"})
FLOAT_FIELDS = frozenset(
    {
        "gpu_utilization",
        "gpu_hours",
        "price_per_gpu_hour",
        "quality_value",
        "data_stall_hours",
        "checkpoint_hours",
        "scheduling_wait_hours",
        "mfu",
        "resumed_from_hours",
    }
)
JSON_FIELDS = frozenset({"interruptions", "tags"})
TEXT_FIELDS = frozenset(RUN_FIELDS) - INT_FIELDS - FLOAT_FIELDS - JSON_FIELDS
# The dashboard's CSV download: every RunOut field, in its order.
EXPORT_COLUMNS = ("id", *RUN_FIELDS, "created_at", *DERIVED_FIELDS)


class RecordError(Exception):
    """The file cannot be read as runs (a usage error, not the server's verdict)."""


@dataclass(frozen=True)
class Record:
    """One run to post, and where it came from (``line 4`` or ``item 2``)."""

    run: dict[str, Any]
    where: str


def read_records(path: Path) -> list[Record]:
    """The runs in ``path``: ``.csv``, ``.jsonl``/``.ndjson``, anything else is JSON."""
    return list(iter_records(path))


def iter_records(path: Path) -> Iterator[Record]:
    """:func:`read_records` one run at a time: a CSV or JSON lines file is read a line
    at a time, never whole (a ``.json`` document is parsed whole: use JSON lines for
    large files)."""
    try:
        with path.open("rb") as raw:
            utf16 = raw.read(2) in (b"\xff\xfe", b"\xfe\xff")  # a UTF-16 byte-order mark
        with path.open(encoding="utf-16" if utf16 else "utf-8-sig", newline="") as handle:
            suffix = path.suffix.lower()
            if suffix == ".csv":
                yield from iter_csv(handle)
            elif suffix in (".jsonl", ".ndjson"):
                yield from iter_jsonl(handle)
            else:
                yield from read_json(handle.read())
    except OSError as exc:
        raise RecordError(f"cannot read {path}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise RecordError(
            f"{path} is not UTF-8 text ({exc.reason}): save it as UTF-8 (UTF-16 with a "
            "byte-order mark is read too)"
        ) from exc


def parse_json(text: str, line: int | None = None) -> Any:
    """``text`` (the whole file, or its ``line``) as JSON, or a RecordError saying where
    and why. Arrays or objects nested thousands deep exhaust the parser's recursion: that
    was a RecursionError traceback and exit 1."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise RecordError(f"line {line or exc.lineno}: invalid JSON: {exc.msg}") from exc
    except RecursionError as exc:
        where = f"line {line}" if line else "the file"
        raise RecordError(f"{where}: JSON nested too deeply to be runs") from exc


def read_json(text: str) -> list[Record]:
    """One run object, a list of them, or ``{"runs": [...]}``."""
    data = parse_json(text)
    if isinstance(data, dict) and set(data) == {"runs"} and isinstance(data["runs"], list):
        data = data["runs"]
    items = data if isinstance(data, list) else [data]
    return [_record(item, f"item {n}") for n, item in enumerate(items, start=1)]


def read_jsonl(handle: TextIO) -> list[Record]:
    """One run object per line; blank lines are skipped."""
    return list(iter_jsonl(handle))


def iter_jsonl(handle: TextIO) -> Iterator[Record]:
    """:func:`read_jsonl` a line at a time."""
    for number, line in enumerate(handle, start=1):
        if not line.strip():
            continue
        item = parse_json(line, number)
        yield _record(item, f"line {number}")


def read_csv(handle: TextIO) -> list[Record]:
    """A header of field names, then one run per row (see :func:`csv_cell`)."""
    return list(iter_csv(handle))


def iter_csv(handle: TextIO) -> Iterator[Record]:
    """:func:`read_csv` a row at a time."""
    reader = csv.reader(handle, strict=True)
    try:
        header = next(reader, None)
        if header is None:
            raise RecordError("line 1: empty file, expected a header row of field names")
        columns = [name.strip() for name in header]
        _check_header(columns)
        start = reader.line_num + 1
        for row in reader:
            where, start = f"line {start}", reader.line_num + 1
            if not row or row == [""]:
                continue
            if len(row) != len(columns):
                raise RecordError(f"{where}: {len(row)} cells, but the header has {len(columns)}")
            run: dict[str, Any] = {}
            for name, text in zip(columns, row):  # lengths checked above
                if name in READ_ONLY_FIELDS or text == "":
                    continue
                run[name] = csv_cell(name, text, where)
            yield Record(run, where)
    except csv.Error as exc:
        raise RecordError(f"line {reader.line_num}: bad CSV: {exc}") from exc


def csv_cell(name: str, text: str, where: str = "") -> Any:
    """A CSV cell as the JSON value of field ``name``: whole numbers, finite numbers,
    JSON for ``interruptions`` and ``tags``, text as it is (less the ``'`` an export puts
    before text a spreadsheet would read as a formula)."""
    prefix = f"{where}: " if where else ""
    if name in INT_FIELDS:
        try:
            return int(text)
        except ValueError:
            raise RecordError(f"{prefix}{name}: {text!r} is not a whole number") from None
    if name in FLOAT_FIELDS:
        try:
            value = float(text)
        except ValueError:
            raise RecordError(f"{prefix}{name}: {text!r} is not a number") from None
        if not math.isfinite(value):
            raise RecordError(f"{prefix}{name}: {text!r} is not a finite number")
        return value
    if name in JSON_FIELDS:
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise RecordError(f"{prefix}{name}: invalid JSON: {exc.msg}") from None
    return text_from_cell(text)


def _check_header(columns: list[str]) -> None:
    known = set(RUN_FIELDS) | READ_ONLY_FIELDS
    unknown = [c for c in columns if c not in known]
    if unknown:
        raise RecordError(
            f"line 1: unknown column(s) {', '.join(map(repr, unknown))}; "
            f"columns are field names: {', '.join(RUN_FIELDS)}"
        )
    repeated = sorted({c for c in columns if columns.count(c) > 1})
    if repeated:
        raise RecordError(f"line 1: repeated column(s) {', '.join(repeated)}")


def _record(item: Any, where: str) -> Record:
    if not isinstance(item, dict):
        raise RecordError(f"{where}: expected a run object, got {type(item).__name__}")
    return Record({k: v for k, v in item.items() if k not in READ_ONLY_FIELDS}, where)


# Writing ------------------------------------------------------------------------------


def write_csv(runs: Iterable[Mapping[str, Any]], out: TextIO) -> int:
    """The export columns, then one row per run (JSON cells for lists and maps, empty
    for null); returns the number of runs written."""
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(EXPORT_COLUMNS)
    count = 0
    for run in runs:
        writer.writerow([csv_value(run.get(c)) for c in EXPORT_COLUMNS])
        count += 1
    return count


def write_jsonl(runs: Iterable[Mapping[str, Any]], out: TextIO) -> int:
    """One JSON object per line, keys in the export's column order."""
    count = 0
    for run in runs:
        row = {c: run.get(c) for c in EXPORT_COLUMNS}
        out.write(json.dumps(row, ensure_ascii=False, allow_nan=False) + "\n")
        count += 1
    return count
