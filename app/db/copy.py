"""PostgreSQL binary COPY: the bulk path of ingestion (see app/runs/repository.py)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from sqlalchemy.orm import Session


def driver_cursor(session: Session) -> Any:
    """A psycopg cursor on the session's own connection, inside its transaction."""
    return session.connection().connection.driver_connection.cursor()  # type: ignore[union-attr]


def copy_rows(
    cursor: Any, table: str, types: dict[str, str], rows: Iterable[tuple[Any, ...]]
) -> None:
    with cursor.copy(f"COPY {table} ({', '.join(types)}) FROM STDIN (FORMAT BINARY)") as copy:
        copy.set_types(list(types.values()))
        for row in rows:
            copy.write_row(row)


def copy_tuples(values: list[dict[str, Any]], types: dict[str, str]) -> Iterable[tuple[Any, ...]]:
    """Tuples in column order; floats as floats and tags as JSON text, for binary COPY."""
    floats = [n for n, t in types.items() if t == "float8"]
    for v in values:
        row = dict(v)
        for name in floats:
            if row[name] is not None:
                row[name] = float(row[name])
        if "tags" in row:
            row["tags"] = json.dumps(row["tags"])
        yield tuple(row[n] for n in types)
