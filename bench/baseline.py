"""The raw baseline: the same rows Cadence stores, written straight into PostgreSQL.

Three ways, each in psycopg 3 from threads that each own one connection (opened
before the clock starts): one transaction per row (INSERT run RETURNING id, then its
interruption), `executemany` per 1000 rows in one transaction, and COPY per 1000 rows
(ids taken from the run sequence first, so interruptions can point at their runs).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import psycopg

from bench import data
from bench.loadgen import LoadResult, percentiles

Rows = list[tuple[tuple[Any, ...], bool]]
Conn = psycopg.Connection[tuple[Any, ...]]

INSERT_RUN = (
    f"INSERT INTO run ({', '.join(data.RUN_COLUMNS)}) "
    f"VALUES ({', '.join(['%s'] * len(data.RUN_COLUMNS))}) RETURNING id"
)
INSERT_INTERRUPTION = (
    f"INSERT INTO interruption ({', '.join(data.INTERRUPTION_COLUMNS)}) "
    f"VALUES ({', '.join(['%s'] * len(data.INTERRUPTION_COLUMNS))})"
)
COPY_RUN = f"COPY run (id, {', '.join(data.RUN_COLUMNS)}) FROM STDIN"
COPY_INTERRUPTION = f"COPY interruption ({', '.join(data.INTERRUPTION_COLUMNS)}) FROM STDIN"
NEXT_IDS = "SELECT nextval(pg_get_serial_sequence('run', 'id')) FROM generate_series(1, %s)"


def connect(conninfo: str) -> Conn:
    return psycopg.connect(conninfo, autocommit=True, connect_timeout=10)


def ensure_pipelines(conninfo: str, price: float = data.PIPELINE_PRICE) -> dict[str, int]:
    """The 50 bench pipelines (as Cadence creates them on first sight), by name -> id."""
    names = [data.pipeline_name(n) for n in range(data.PIPELINES)]
    with connect(conninfo) as conn:
        conn.cursor().executemany(
            "INSERT INTO pipeline (name, display_name, owner, price_per_gpu_hour, "
            "monthly_budget_usd, runs_per_week, quality_metric, higher_is_better) "
            "VALUES (%s, %s, '', %s, NULL, 1.0, 'ndcg@10', true) ON CONFLICT (name) DO NOTHING",
            [(n, n, price) for n in names],
        )
        rows = conn.execute("SELECT name, id FROM pipeline WHERE name = ANY(%s)", [names])
        return {str(name): int(pk) for name, pk in rows}


def truncate(conninfo: str) -> None:
    with connect(conninfo) as conn:
        conn.execute("TRUNCATE interruption, evaluation, run")


def count_runs(conninfo: str) -> int:
    with connect(conninfo) as conn:
        row = conn.execute("SELECT count(*) FROM run").fetchone()
    return int(row[0]) if row else 0


def make_rows(prefix: str, count: int, pipeline_ids: dict[str, int]) -> Rows:
    return [data.db_rows(prefix, i, pipeline_ids) for i in range(count)]


def _per_row(conn: Conn, rows: Rows) -> None:
    [(row, interrupted)] = rows
    with conn.transaction():
        cur = conn.execute(INSERT_RUN, row)
        fetched = cur.fetchone()
        if interrupted and fetched is not None:
            conn.execute(INSERT_INTERRUPTION, data.interruption_row(fetched[0]))


def _executemany(conn: Conn, rows: Rows) -> None:
    with conn.transaction(), conn.cursor() as cur:
        cur.executemany(INSERT_RUN, [r for r, _ in rows], returning=True)
        ids: list[int] = []
        while True:
            fetched = cur.fetchone()
            if fetched is None:
                raise psycopg.DataError("executemany returned no id for a row")
            ids.append(fetched[0])
            if not cur.nextset():
                break
        cur.executemany(
            INSERT_INTERRUPTION,
            [data.interruption_row(pk) for pk, (_, hit) in zip(ids, rows, strict=True) if hit],
        )


def _copy(conn: Conn, rows: Rows) -> None:
    with conn.transaction(), conn.cursor() as cur:
        ids = [pk for (pk,) in cur.execute(NEXT_IDS, [len(rows)])]
        with cur.copy(COPY_RUN) as copy:
            for pk, (row, _) in zip(ids, rows, strict=True):
                copy.write_row((pk, *row))
        with cur.copy(COPY_INTERRUPTION) as copy:
            for pk, (_, hit) in zip(ids, rows, strict=True):
                if hit:
                    copy.write_row(data.interruption_row(pk))


METHODS: dict[str, Callable[[Conn, Rows], None]] = {
    "per_row": _per_row,
    "executemany": _executemany,
    "copy": _copy,
}


def run(
    conninfo: str,
    method: str,
    rows: Rows,
    chunk: int,
    concurrency: int,
    time_limit: float,
    on_ready: Callable[[], None] | None = None,
    on_done: Callable[[], None] | None = None,
) -> LoadResult:
    """Write `rows` in chunks of `chunk` rows (one transaction each) from `concurrency` threads.

    `on_ready` runs once every connection is open (start the measurement there) and
    `on_done` before they close (so PostgreSQL backends' CPU is still readable).
    """
    fn = METHODS[method]
    chunks: Sequence[Rows] = [rows[i : i + chunk] for i in range(0, len(rows), chunk)]
    conns = [connect(conninfo) for _ in range(concurrency)]
    lock = threading.Lock()
    state: dict[str, Any] = {"next": 0, "lat": [], "ok": 0, "err": 0, "rows": 0, "sample": ""}
    deadline = 0.0

    def worker(conn: Conn) -> None:
        while time.perf_counter() < deadline:
            with lock:
                index = state["next"]
                if index >= len(chunks):
                    return
                state["next"] += 1
            t0 = time.perf_counter()
            try:
                fn(conn, chunks[index])
                ok = True
            except psycopg.Error as exc:
                ok = False
                error = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
            secs = time.perf_counter() - t0
            with lock:
                state["lat"].append(secs * 1000)
                if ok:
                    state["ok"] += 1
                    state["rows"] += len(chunks[index])
                else:
                    state["err"] += 1
                    state["sample"] = state["sample"] or error

    try:
        if on_ready:
            on_ready()
        t0 = time.perf_counter()
        deadline = t0 + time_limit
        pool = [threading.Thread(target=worker, args=(c,), daemon=True) for c in conns]
        for t in pool:
            t.start()
        for t in pool:
            t.join(timeout=time_limit + 60)
        elapsed = time.perf_counter() - t0
        if on_done:
            on_done()
    finally:
        for c in conns:
            c.close()
    return LoadResult(
        requests=state["ok"] + state["err"],
        ok=state["ok"],
        errors=state["err"],
        elapsed_s=elapsed,
        latencies_ms=percentiles(state["lat"]),
        generator=f"psycopg {method} x{concurrency} connections",
        error_sample=state["sample"],
        extra={"rows": state["rows"], "rows_per_transaction": chunk},
    )
