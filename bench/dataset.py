"""The analytics database: N runs over 500 pipelines, loaded with COPY, reused between runs.

`big-pipeline` holds 10,000 runs: baseline (60%), candidate (30%) and a `scale-probe`
variant at 4/8/16/32 workers (10%); `small-pipeline` holds 100; the other 498 share the
rest. Runs are spread over the 104 weeks before the build day; every 40th attempt fails
and the next retries its retraining. The run table's interruption sums are those of the
interruption rows loaded with it. The schema comes from `cadence migrate`; a marker in
the database comment says the load completed.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg import sql

from bench import data
from bench.procs import say
from bench.server import (
    BenchError,
    cadence_env,
    create_database,
    database_exists,
    free_port,
    migrate,
    pg_conninfo,
    sqlalchemy_url,
)

VERSION = 2  # 2: attempts (outcome, retraining_id), a failed first attempt now and then
PIPELINES = 500
BIG, BIG_RUNS = "big-pipeline", 10_000
SMALL, SMALL_RUNS = "small-pipeline", 100
WINDOW_S = 104 * 7 * 86400
CHUNK = 20_000
RUN_COLUMNS = ("id", *data.RUN_COLUMNS)  # with explicit ids, to link interruptions
INTERRUPTION_COLUMNS = ("id", *data.INTERRUPTION_COLUMNS)
PROBE_WORKERS = (4, 8, 16, 32)
CAUSES = ("preemption", "node failure", "nccl timeout")


TEAMS = 20


def marker(runs: int, pipelines: int = PIPELINES) -> str:
    more = "" if pipelines == PIPELINES else f" pipelines={pipelines}"
    return f"cadence-bench dataset v{VERSION} runs={runs}{more}"


def plan(total: int, pipelines: int = PIPELINES) -> list[tuple[int, str, int]]:
    """(pipeline id, name, runs) for every pipeline."""
    rest = total - BIG_RUNS - SMALL_RUNS
    others = pipelines - 2
    sizes = [rest // others + (1 if k < rest % others else 0) for k in range(others)]
    named = [(BIG, BIG_RUNS), (SMALL, SMALL_RUNS)] + [
        (f"pipe-{k:04d}" if pipelines > 1000 else f"pipe-{k:03d}", n) for k, n in enumerate(sizes)
    ]
    return [(pk, name, n) for pk, (name, n) in enumerate(named, start=1)]


def _ts(epoch: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S+00", time.gmtime(epoch))


def _run_shape(big: bool, k: int, g: int) -> tuple[str, int, float, float, float]:
    """(variant, workers, hours, utilization, quality) of run k of a pipeline (global g)."""
    slot = k % 10
    if big and slot == 9:
        w = PROBE_WORKERS[(k // 10) % 4]
        hours = 16 * (1 + 0.05 * (w - 1) + 0.001 * w * (w - 1)) / w + (g % 7) * 0.01
        return "scale-probe", w, hours, 0.55 + (g % 9) / 100, 0.40 + (g % 13) / 1000
    if (big and slot >= 6) or (not big and k % 3 == 2):
        return "candidate", 8, 9.0 + g % 4, 0.62 + (g % 11) / 100, 0.412 + (g % 13) / 1000
    return "baseline", 8, 12.0 + g % 5, 0.35 + (g % 11) / 100, 0.41 + (g % 13) / 1000


def generate(
    total: int, end: float, pipelines: int = PIPELINES, teams: int = TEAMS
) -> Iterator[tuple[str, str]]:
    """Chunks of (run COPY text, interruption COPY text)."""
    runs: list[str] = []
    stops: list[str] = []
    g, stop_id = 0, 0
    for pk, name, n in plan(total, pipelines):
        big = name == BIG
        spacing = WINDOW_S / n
        for k in range(n):
            g += 1
            variant, w, hours, util, quality = _run_shape(big, k, g)
            start = end - (n - k) * spacing
            stall = round(hours * (0.1 + (g % 5) * 0.03), 3)
            ckpt = round(hours * 0.05, 3)
            count = 0 if variant == "scale-probe" else (2 if g % 30 == 0 else int(g % 6 == 0))
            for pos in range(count):
                stop_id += 1
                stops.append(f"{stop_id}\t{g}\t{pos}\t0.5\t0.25\t0.3\t{CAUSES[(g + pos) % 3]}\n")
            # Every 40th attempt fails and the next one retries the same retraining.
            failed = g % 40 == 0 and k + 1 < n
            outcome, retraining = (
                ("failed", f"run-{k + 1:06d}") if failed else ("succeeded", f"run-{k:06d}")
            )
            sha = (g * 2654435761) % 268435456
            tags = f'{{"git_sha": "{sha:07x}", "team": "t{pk % teams}"}}'
            runs.append(
                f"{g}\t{pk}\trun-{k:06d}\t{variant}\t{_ts(start)}\t{_ts(start + hours * 3600)}\t"
                f"{w}\tA100-80GB\t{w * hours!r}\t{util!r}\t\\N\t{data.PIPELINE_PRICE!r}\t"
                f"ndcg@10\t{quality!r}\t{stall!r}\t"
                f"{ckpt!r}\t{0.1 * (g % 4)!r}\t\\N\t{tags}\t{count}\t{0.5 * count!r}\t"
                f"{0.25 * count!r}\t{0.3 * count!r}\t{outcome}\t{retraining}\t0.0\n"
            )
            if len(runs) >= CHUNK:
                yield "".join(runs), "".join(stops)
                runs, stops = [], []
    if runs:
        yield "".join(runs), "".join(stops)


def _check_columns(conn: psycopg.Connection[Any]) -> None:
    """Fail clearly if the schema grew a required column this generator does not fill."""
    known = {"run": {*RUN_COLUMNS, "created_at"}, "interruption": set(INTERRUPTION_COLUMNS)}
    rows = conn.execute(
        "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = "
        "'public' AND table_name IN ('run', 'interruption') AND is_nullable = 'NO' "
        "AND column_default IS NULL"
    ).fetchall()
    unknown = [f"{t}.{c}" for t, c in rows if c not in known[t]]
    if unknown:
        raise BenchError(f"bench/dataset.py does not fill required columns {unknown}: update it")


def load(conninfo: str, total: int, pipelines: int = PIPELINES) -> dict[str, Any]:
    """COPY the runs (a team per pipeline: its owner ``team-NN`` and the runs' ``team``
    tag), then recompute the rollups from them in one INSERT ... SELECT."""
    teams = TEAMS if pipelines == PIPELINES else 50
    end = float(int(time.time()) // 86400 * 86400)
    t0 = time.perf_counter()
    with psycopg.connect(conninfo, autocommit=True) as conn:
        _check_columns(conn)
        conn.execute("SET synchronous_commit = off")
        with conn.transaction(), conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO pipeline (id, name, display_name, owner, price_per_gpu_hour, "
                "monthly_budget_usd, runs_per_week, quality_metric, higher_is_better) "
                "VALUES (%s, %s, %s, %s, %s, 50000, 1.0, 'ndcg@10', true)",
                [
                    (pk, name, name, f"team-{pk % teams:02d}", data.PIPELINE_PRICE)
                    for pk, name, _ in plan(total, pipelines)
                ],
            )
            stop_text: list[str] = []
            with cur.copy(f"COPY run ({', '.join(RUN_COLUMNS)}) FROM STDIN") as copy:
                for run_text, stops in generate(total, end, pipelines, teams):
                    copy.write(run_text)
                    stop_text.append(stops)
            copied = time.perf_counter()
            with cur.copy(f"COPY interruption ({', '.join(INTERRUPTION_COLUMNS)}) FROM STDIN") as c:
                for stops in stop_text:
                    c.write(stops)
            for table in ("pipeline", "run", "interruption"):
                cur.execute(
                    sql.SQL(
                        "SELECT setval(pg_get_serial_sequence({t}, 'id'), "
                        "(SELECT max(id) FROM {i}))"
                    ).format(t=sql.Literal(table), i=sql.Identifier(table))
                )
        loaded = time.perf_counter()
        rollups = rebuild_rollups(conninfo)
        conn.execute("VACUUM ANALYZE")
    return {
        "copy_runs_s": round(copied - t0, 1),
        "copy_total_s": round(loaded - t0, 1),
        "rollups_s": rollups,
        "vacuum_analyze_s": round(time.perf_counter() - loaded - rollups, 1),
        "run_window_end": datetime.fromtimestamp(end, UTC).isoformat(),
    }


def rebuild_rollups(conninfo: str) -> float:
    """``run_rollup`` from the loaded runs, with the application's own recomputation
    (when the schema has it: older code under ``--code`` has no rollups). Seconds taken."""
    try:
        from app.db.rollup import rebuild
    except ImportError:
        return 0.0
    from sqlalchemy import create_engine

    t0 = time.perf_counter()
    engine = create_engine("postgresql+psycopg://" + conninfo.split("://", 1)[1])
    try:
        with engine.begin() as conn:
            if conn.exec_driver_sql("SELECT to_regclass('run_rollup')").scalar() is None:
                return 0.0
            conn.exec_driver_sql("SET LOCAL work_mem = '256MB'")
            rebuild(conn)
            if conn.exec_driver_sql("SELECT to_regclass('run_variant')").scalar() is not None:
                from app.db.rollup import rebuild_variants

                rebuild_variants(conn)
    finally:
        engine.dispose()
    return round(time.perf_counter() - t0, 1)


def comment(conninfo: str) -> str | None:
    with psycopg.connect(conninfo, autocommit=True, connect_timeout=5) as conn:
        row = conn.execute(
            "SELECT shobj_description(oid, 'pg_database') FROM pg_database "
            "WHERE datname = current_database()"
        ).fetchone()
    return str(row[0]) if row and row[0] else None


def is_built(base: str, name: str, total: int, pipelines: int = PIPELINES) -> bool:
    """The database exists and its marker says a load of `total` runs completed."""
    try:
        return database_exists(base, name) and comment(pg_conninfo(base, name)) == marker(
            total, pipelines
        )
    except psycopg.Error:
        return False


def ensure(
    base: str, name: str, total: int, rebuild: bool, pipelines: int = PIPELINES
) -> dict[str, Any]:
    """Reuse the database when its marker matches (after `cadence migrate`), else build it."""
    conninfo = pg_conninfo(base, name)
    env = cadence_env(sqlalchemy_url(base, name), free_port(), 1)
    if not rebuild and is_built(base, name, total, pipelines):
        try:
            migrate(env)
            with psycopg.connect(conninfo, autocommit=True) as conn:
                row = conn.execute("SELECT count(*) FROM run").fetchone()
            if row and int(row[0]) == total:
                return {"database": name, "runs": total, "reused": True}
        except (BenchError, psycopg.Error) as exc:
            # Never drop a built dataset on our own: the 10M-run one takes ~17 minutes.
            raise BenchError(
                f"cannot reuse {name} ({exc}); fix the cause, or pass --rebuild to drop and "
                "rebuild it"
            ) from exc
    say(f"  building {name}: {total:,} runs over {pipelines} pipelines (COPY)...")
    t0 = time.perf_counter()
    create_database(base, name, drop_first=True)
    migrate(env)
    info = load(conninfo, total, pipelines)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(
            sql.SQL("COMMENT ON DATABASE {} IS {}").format(
                sql.Identifier(name), sql.Literal(marker(total, pipelines))
            )
        )
    info.update(database=name, runs=total, reused=False, build_s=round(time.perf_counter() - t0, 1))
    say(f"  built in {info['build_s']} s")
    return info
