"""Ingestion phases: Cadence (single runs via wrk, batches via Python) and raw psycopg.

Per backend: wipe the database and `cadence migrate`, start the service, warm it up,
then for each repeat run the pairs side by side (Cadence, then the raw baseline of the
same shape), truncating the run tables before every phase.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
import traceback
from collections.abc import Callable
from typing import Any

from bench import baseline, data, loadgen
from bench.config import Config
from bench.measure import Meter, healthz_probe
from bench.procs import say
from bench.server import (
    BenchError,
    Server,
    cadence_env,
    create_database,
    create_token,
    free_port,
    migrate,
    pg_conninfo,
    sqlalchemy_url,
)

RUNS_PATH = "/api/v1/runs"
BATCH_PATH = "/api/v1/runs/batch"


class Store:
    """The benchmark database of one backend: wipe, truncate, count."""

    def __init__(self, cfg: Config, backend: str) -> None:
        self.cfg, self.backend = cfg, backend
        if backend == "postgresql":
            self.url = sqlalchemy_url(cfg.pg, cfg.ingest_db)
            self.conninfo = pg_conninfo(cfg.pg, cfg.ingest_db)
            self.database: str | None = cfg.ingest_db
        else:
            self.url = f"sqlite:///{cfg.sqlite_path}"
            self.conninfo = ""
            self.database = None

    def wipe_and_migrate(self) -> None:
        if self.backend == "postgresql":
            create_database(self.cfg.pg, self.cfg.ingest_db, drop_first=True)
        else:
            self.cfg.sqlite_path.parent.mkdir(parents=True, exist_ok=True)
            for suffix in ("", "-wal", "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(f"{self.cfg.sqlite_path}{suffix}")
        migrate(cadence_env(self.url, free_port(), 1))

    def truncate(self) -> None:
        if self.backend == "postgresql":
            baseline.truncate(self.conninfo)
            return
        with sqlite3.connect(self.cfg.sqlite_path, timeout=30) as conn:
            conn.execute("DELETE FROM interruption")
            conn.execute("DELETE FROM run")

    def count(self) -> int:
        if self.backend == "postgresql":
            return baseline.count_runs(self.conninfo)
        with sqlite3.connect(self.cfg.sqlite_path, timeout=30) as conn:
            return int(conn.execute("SELECT count(*) FROM run").fetchone()[0])


def _summary(rec: dict[str, Any]) -> str:
    if rec.get("error"):
        return f"FAILED: {rec['error']}"
    lat = rec.get("latency_ms", {})
    cpu = rec.get("server_cpu_ms_per_run")
    srv = f", server {cpu:.2f} ms CPU/run" if cpu is not None else ""
    return (
        f"{rec['runs_per_s']:,.0f} runs/s, p50 {lat.get('p50', 0):.1f} / p95 "
        f"{lat.get('p95', 0):.1f} ms, errors {rec['errors']}{srv}, "
        f"generator {rec['generator_core_pct']}% of a core, machine {rec['machine_busy_pct']}%"
    )


def failure(group: str, backend: str, name: str, repeat: int, exc: BaseException) -> dict[str, Any]:
    detail = str(exc) if isinstance(exc, BenchError) else f"{type(exc).__name__}: {exc}"
    if not isinstance(exc, BenchError):
        say(traceback.format_exc(), err=True)
    return {
        "group": group,
        "backend": backend,
        "name": name,
        "key": f"{backend}:{name}",
        "repeat": repeat,
        "error": detail[:500],
    }


class Ingestion:
    def __init__(self, cfg: Config, backend: str, out: list[dict[str, Any]]) -> None:
        self.cfg, self.backend, self.out = cfg, backend, out
        self.store = Store(cfg, backend)
        self.server: Server | None = None
        self.token = ""
        self.pipeline_ids: dict[str, int] = {}

    def phase(
        self, name: str, system: str, repeat: int, body: Callable[[Meter], dict[str, Any]]
    ) -> None:
        tag = f"[{self.backend} r{repeat + 1}]"
        try:
            self.store.truncate()
            pid = self.server.pid if self.server and system == "cadence" else None
            rec = body(Meter(pid, self.store.database))
            rec.update(
                group="ingest",
                backend=self.backend,
                name=name,
                system=system,
                key=f"{self.backend}:{name}",
                repeat=repeat,
                db_runs_after=self.store.count(),
            )
        except Exception as exc:
            rec = failure("ingest", self.backend, name, repeat, exc)
        self.out.append(rec)
        say(f"  {tag} {name}: {_summary(rec)}")

    # -- Cadence ---------------------------------------------------------------

    def single(
        self, prefix: str, size: tuple[int, float], connections: int
    ) -> Callable[[Meter], dict[str, Any]]:
        def body(meter: Meter) -> dict[str, Any]:
            assert self.server is not None
            meter.start()
            load = loadgen.run_wrk(
                self.server.url, RUNS_PATH, self.token, prefix, size[0], connections, size[1]
            )
            meter.stop()
            return meter.record(load, runs=load.ok, concurrency=connections)

        return body

    def batches(
        self, prefix: str, per: int, size: tuple[int, float]
    ) -> Callable[[Meter], dict[str, Any]]:
        def body(meter: Meter) -> dict[str, Any]:
            assert self.server is not None
            bodies = [data.batch_body(prefix, k * per, per) for k in range(size[0])]
            largest = max(len(b) for b in bodies)
            meter.start()
            load = loadgen.post_bodies(
                "127.0.0.1",
                self.server.port,
                self.token,
                BATCH_PATH,
                bodies,
                per,
                self.cfg.batch_concurrency,
                size[1],
            )
            meter.stop()
            rec = meter.record(load, runs=load.ok * per, concurrency=self.cfg.batch_concurrency)
            rec["largest_body_bytes"] = largest
            return rec

        return body

    # -- raw psycopg -------------------------------------------------------------

    def raw(
        self, method: str, prefix: str, count: int, chunk: int, concurrency: int
    ) -> Callable[[Meter], dict[str, Any]]:
        def body(meter: Meter) -> dict[str, Any]:
            rows = baseline.make_rows(prefix, count, self.pipeline_ids)
            load = baseline.run(
                self.store.conninfo,
                method,
                rows,
                chunk,
                concurrency,
                self.cfg.raw_limit_s,
                on_ready=meter.start,
                on_done=meter.stop,
            )
            rows_done = int(load.extra["rows"])
            return meter.record(load, runs=rows_done, concurrency=concurrency)

        return body

    # -- the sequence --------------------------------------------------------------

    def run(self) -> None:
        cfg = self.cfg
        do_cadence = "ingest" in cfg.phases
        do_raw = "baseline" in cfg.phases and self.backend == "postgresql"
        if not (do_cadence or do_raw):
            return
        say(f"\n== ingestion on {self.backend} ==")
        self.store.wipe_and_migrate()
        with contextlib.ExitStack() as stack:
            if do_cadence:
                self.server = stack.enter_context(Server(self.store.url, cfg.workers, self.backend))
                self.token = create_token(self.server.env)
                self._warm_up()
            if do_raw:
                self.pipeline_ids = baseline.ensure_pipelines(self.store.conninfo)
            repeats = cfg.repeat if self.backend == "postgresql" else 1
            bc = cfg.batch_concurrency
            for r in range(repeats):
                steps: list[tuple[str, str, Callable[[Meter], dict[str, Any]]]] = []
                if do_cadence:
                    steps.append(
                        ("cadence single c=1", "cadence", self.single(f"r{r}s1", cfg.single_c1, 1))
                    )
                if do_raw:
                    steps.append(
                        (
                            "raw per-row c=1",
                            "raw",
                            self.raw("per_row", f"r{r}p1", cfg.single_c1[0], 1, 1),
                        )
                    )
                if do_cadence:
                    steps.append(
                        (
                            "cadence single c=16",
                            "cadence",
                            self.single(f"r{r}s16", cfg.single_c16, 16),
                        )
                    )
                if do_raw:
                    steps.append(
                        (
                            "raw per-row c=16",
                            "raw",
                            self.raw("per_row", f"r{r}p16", cfg.single_c16[0], 1, 16),
                        )
                    )
                if do_cadence:
                    steps.append(
                        (
                            f"cadence batch-100 c={bc}",
                            "cadence",
                            self.batches(f"r{r}b100", 100, cfg.batch100),
                        )
                    )
                    steps.append(
                        (
                            f"cadence batch-1000 c={bc}",
                            "cadence",
                            self.batches(f"r{r}b1k", 1000, cfg.batch1000),
                        )
                    )
                if do_raw:
                    n = cfg.batch1000[0] * 1000
                    steps.append(
                        (
                            f"raw executemany-1000 c={bc}",
                            "raw",
                            self.raw("executemany", f"r{r}em", n, 1000, bc),
                        )
                    )
                    steps.append(
                        (f"raw COPY-1000 c={bc}", "raw", self.raw("copy", f"r{r}cp", n, 1000, bc))
                    )
                for name, system, body in steps:
                    self.phase(name, system, r, body)
            if do_cadence and self.server is not None:
                self.server.stop()
                if self.backend == "postgresql" and cfg.workers != 1:
                    self._single_worker_comparison()
        self.store.truncate()

    def _warm_up(self) -> None:
        assert self.server is not None
        t0 = time.perf_counter()
        load = loadgen.run_wrk(self.server.url, RUNS_PATH, self.token, "warm", 200, 4, 20)
        batch = loadgen.post_bodies(
            "127.0.0.1",
            self.server.port,
            self.token,
            BATCH_PATH,
            [data.batch_body("warmb", 0, 100)],
            100,
            1,
            20,
        )
        probe = healthz_probe(
            "127.0.0.1", self.server.port, self.cfg.workers, self.backend, self.cfg.healthz
        )
        self.out.append(probe)
        say(
            f"  warm-up: {load.ok}/{load.requests} single ok, batch ok={batch.ok} "
            f"({time.perf_counter() - t0:.1f} s); {probe['name']}: {probe['p50_ms']:.2f} ms "
            f"(new connection each time: {probe['p50_new_connection_ms']:.2f} ms)"
        )
        if load.errors or batch.errors:
            say(f"  warm-up errors: {load.error_sample or batch.error_sample}")

    def _single_worker_comparison(self) -> None:
        """The same service with one worker process: the Nagle check and single c=1 again."""
        try:
            with Server(self.store.url, 1, f"{self.backend}-1worker") as server:
                self.server = server
                self.token = create_token(server.env)
                probe = healthz_probe("127.0.0.1", server.port, 1, self.backend, self.cfg.healthz)
                self.out.append(probe)
                say(f"  {probe['name']}: {probe['p50_ms']:.2f} ms")
                self.phase(
                    "cadence single c=1 (workers=1)",
                    "cadence",
                    0,
                    self.single("w1s1", self.cfg.single_c1, 1),
                )
        except Exception as exc:
            self.out.append(failure("latency", self.backend, "workers=1 comparison", 0, exc))
        finally:
            self.server = None


def run_ingest(cfg: Config, out: list[dict[str, Any]]) -> None:
    for backend in cfg.backends:
        try:
            Ingestion(cfg, backend, out).run()
        except Exception as exc:
            out.append(failure("ingest", backend, "setup", 0, exc))
            say(f"  ingestion on {backend} FAILED: {out[-1]['error']}")
