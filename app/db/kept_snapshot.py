"""What the workers keep, kept by the database too, so a new worker's first org-wide read
finds it (issue 38, the warm start).

A cold worker's first portfolio on 10M runs took 20-30 s: every pipeline's weeks, cost
window, cost model and month to date made again, by every worker after every restart,
and 5,000 forecasts cannot be made in 1 s on two cores. So the maps declared ``shared``
in :data:`app.db.kept.KEPT` are written to the table ``kept_snapshot`` (one row per code
version) when a worker's warm start has made them and every
``CADENCE_KEPT_SNAPSHOT_MINUTES`` after, and a worker that starts reads them back in one
statement before it serves.

Never stale, by the rule that holds in memory: a value is served only under a version
equal to the one its reader asks for (the change counters, settings and prices read in
the request), and a row holds only the values of one code (:data:`CODE`: a digest of
the package's files and the numeric libraries' versions; a deploy that changes either
starts cold, and its warm start writes its own row). Only read sessions keep values
(``KeptMap``), so no value made inside a write that rolled back is ever written here.

Trusted no further than data: a row is read with an unpickler that builds only
Cadence's own dataclasses, enums and named tuples, numpy arrays and scalars, dates and
built-in containers (``find_class`` below, after the Python documentation's
"Restricting Globals"). A row it refuses, or cannot read, is logged and skipped: the
worker starts cold, as it did before this module.
"""

from __future__ import annotations

import dataclasses
import enum
import gc
import hashlib
import io
import logging
import pickle
import sys
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import scipy
from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from app.db.engine import Database
from app.db.kept import KeptStore
from app.db.models_kept import KeptSnapshot
from app.db.sql import dialect, upsert_insert

log = logging.getLogger("cadence.kept")

PACKAGE = Path(__file__).resolve().parents[1]  # app/
# Rows of other code versions are left this long for workers of a rolling deploy.
OTHER_CODE_KEPT = timedelta(days=1)


def code_digest(package: Path = PACKAGE) -> str:
    """The digest of what makes the values: every Python and data file of the package,
    Python's version and the numeric libraries'."""
    h = hashlib.sha256()
    for path in sorted(package.rglob("*")):
        if path.suffix in {".py", ".csv"} and "__pycache__" not in path.parts:
            h.update(path.relative_to(package).as_posix().encode())
            h.update(path.read_bytes())
    h.update(f"{sys.version_info[:2]} numpy {np.__version__} scipy {scipy.__version__}".encode())
    return h.hexdigest()


CODE = code_digest()  # read once at import: the files a worker runs do not change under it

# What the unpickler may build besides Cadence's own value types.
ALLOWED = frozenset(
    {
        ("builtins", "set"),
        ("builtins", "frozenset"),
        ("builtins", "complex"),
        ("builtins", "slice"),
        ("collections", "OrderedDict"),
        ("datetime", "date"),
        ("decimal", "Decimal"),  # PostgreSQL's numeric sums
        ("datetime", "datetime"),
        ("datetime", "timedelta"),
        ("datetime", "timezone"),
        ("numpy", "dtype"),
        ("numpy", "ndarray"),
        ("numpy.core.multiarray", "_reconstruct"),
        ("numpy.core.multiarray", "scalar"),
        ("numpy._core.multiarray", "_reconstruct"),
        ("numpy._core.multiarray", "scalar"),
        ("numpy._core.numeric", "_frombuffer"),
        ("numpy.core.numeric", "_frombuffer"),
    }
)
ALLOWED_DTYPES = ("numpy.dtypes",)  # numpy 2's dtype classes (Float64DType, ...)


class Refused(pickle.UnpicklingError):
    """A row that would build something other than kept values."""


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in ALLOWED:
            return super().find_class(module, name)
        found = super().find_class(module, name) if _may_import(module) else None
        if found is not None and _is_value_type(module, found):
            return found
        raise Refused(f"{module}.{name} is not a kept value's type")


def _may_import(module: str) -> bool:
    # Only modules already imported (the server imported every value type it keeps), so
    # a refused row cannot make the worker import anything.
    return (module.startswith("app.") or module in ALLOWED_DTYPES) and module in sys.modules


def _is_value_type(module: str, found: Any) -> bool:
    if not isinstance(found, type):
        return False
    if module in ALLOWED_DTYPES:
        return issubclass(found, np.dtype)
    if not found.__module__.startswith("app."):  # another library's type an app module imported
        return False
    return (
        dataclasses.is_dataclass(found)
        or issubclass(found, enum.Enum)
        or (issubclass(found, tuple) and hasattr(found, "_fields"))  # a NamedTuple
    )


def dumps(store: KeptStore) -> tuple[bytes, int]:
    """The shared maps' values as one payload (one pickle: values shared between maps,
    a window's cost series in three of them, are written once), and how many. Memos
    inside kept values are left out by their ``__getstate__``."""
    maps = store.shared()
    return pickle.dumps(maps, protocol=pickle.HIGHEST_PROTOCOL), sum(map(len, maps.values()))


def loads(payload: bytes) -> dict[str, list[tuple[Any, Any, Any]]]:
    """A payload read back; :class:`Refused` when it holds anything but kept values."""
    found = _Unpickler(io.BytesIO(payload)).load()
    if not isinstance(found, dict):
        raise Refused(f"a payload of {type(found).__name__}, not the maps")
    return found


@dataclass(frozen=True)
class Loaded:
    values: int  # kept in this worker's maps
    seconds: float


def load(db: Database) -> Loaded | None:
    """Keep, in ``db``'s maps, what the database holds for this code; None when there is
    nothing to read or it could not be read (logged: the worker starts cold)."""
    began = datetime.now(UTC)
    try:
        with db.read() as session:
            payload = _payload(session)
        if payload is None:
            return None
        gc.disable()  # a million objects made at once: no collection would free any
        try:
            maps = loads(payload)
        finally:
            gc.enable()
        kept = sum(db.kept.restore(name, entries) for name, entries in maps.items())
    except Exception as exc:  # a snapshot only saves time: never stop the server
        log.warning("kept values not read from the database (starting cold): %s", exc)
        return None
    took = (datetime.now(UTC) - began).total_seconds()
    log.info("kept values read from the database: %d in %.1f s", kept, took)
    return Loaded(kept, took)


def _payload(session: Session) -> bytes | None:
    if dialect(session) != "postgresql":
        return session.scalar(select(KeptSnapshot.payload).where(KeptSnapshot.code == CODE))
    # Fetched in binary, not as hex text: 0.3 s for 70 MB, not 0.75 (psycopg's cursor).
    driver: Any = session.connection().connection.driver_connection
    with driver.cursor(binary=True) as cursor:
        cursor.execute("SELECT payload FROM kept_snapshot WHERE code = %s", (CODE,))
        row = cursor.fetchone()
    return None if row is None else bytes(row[0])


def save(db: Database) -> int:
    """Write this worker's shared maps as its code's row (replacing the row another
    worker of the same code wrote: each value in it is checked by its version when read);
    how many values. Rows of other code older than a day are deleted."""
    payload, count = dumps(db.kept)
    now = datetime.now(UTC)
    row = {"code": CODE, "written_at": now, "entries": count, "payload": payload}
    with db.write() as session:
        insert = upsert_insert(session, KeptSnapshot).values(**row)
        # Two workers of one code writing at once: the later row wins, nothing fails.
        session.execute(insert.on_conflict_do_update(index_elements=["code"], set_=row))
        session.execute(
            delete(KeptSnapshot).where(
                KeptSnapshot.code != CODE, KeptSnapshot.written_at < now - OTHER_CODE_KEPT
            )
        )
    return count
