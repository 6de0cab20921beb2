"""A FOCUS file's header and rows, streamed: a CSV row at a time, a Parquet file a batch
of one row group at a time, so reading a 200 MB export holds one batch (BATCH rows) and
never the file (docs/finops.md states the bound).

Refused here, before any row is read: a header that names a column twice (which of the
two would count?), a file that is not UTF-8 text (UTF-16 said so, not "lacking columns"),
and cells past CELL_LIMIT characters.
"""

from __future__ import annotations

import csv
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from app.exceptions import Invalid

BATCH = 2_000  # Parquet rows decoded at a time
CELL_LIMIT = 1 << 20  # characters of one CSV cell (a Tags cell of 1 MB is already absurd)
UTF16 = (b"\xff\xfe", b"\xfe\xff")


class BillError(Invalid):
    """A bill Cadence cannot import: the message names the file, row and column."""


Rows = Iterator[dict[str, Any]]


def open_rows(path: Path) -> tuple[list[str], Rows]:
    """The file's header and an iterator of its rows (dicts by column name)."""
    is_parquet = path.suffix.lower() in (".parquet", ".pq")
    header, rows = (_parquet_rows if is_parquet else _csv_rows)(path)
    repeated = sorted(name for name, n in Counter(header).items() if n > 1)
    if repeated:
        raise BillError(
            f"{path}: column {', '.join(repeated)} appears more than once; a FOCUS "
            "export names each column once (which one would count?)",
            fields=[
                {"field": f"{path}:header:{name}", "reason": "repeated column"} for name in repeated
            ],
        )
    return header, rows


def _csv_rows(path: Path) -> tuple[list[str], Rows]:
    with path.open("rb") as raw:
        start = raw.read(4)
    if start[:2] in UTF16:
        raise BillError(f"{path} is UTF-16 text: export the bill as UTF-8 (CSV) or Parquet")
    csv.field_size_limit(CELL_LIMIT)
    handle = path.open(encoding="utf-8-sig", newline="")
    reader = csv.reader(handle)
    header = next(reader, [])

    def rows() -> Rows:
        with handle:
            for cells in reader:
                if len(cells) > len(header):
                    raise csv.Error(f"line {reader.line_num} has more cells than the header")
                yield dict(zip(header, cells, strict=False))

    return header, rows()


def _parquet_rows(path: Path) -> tuple[list[str], Rows]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise BillError(f"{path}: reading Parquet needs pyarrow (pip install pyarrow)") from None
    try:
        parquet = pq.ParquetFile(path)
    except Exception as exc:  # pyarrow's errors have no common base worth naming
        raise BillError(f"{path}: not a readable Parquet file ({exc})") from None
    header = list(parquet.schema_arrow.names)

    def rows() -> Rows:
        try:
            for batch in parquet.iter_batches(batch_size=BATCH):
                yield from batch.to_pylist()
        except (OSError, ValueError) as exc:  # a corrupt row group, past the header
            raise BillError(f"{path}: not a readable Parquet file ({exc})") from None

    return header, rows()
