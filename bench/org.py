"""Org phase: organisation-wide reads on 5,000 pipelines (50 teams) and N runs.

The database (`cadence_bench_org_<N>`) is built like the analytics one (COPY, reused while
its marker matches) with the rollups recomputed after the load. Each URL gets the same
sequential timing as the analytics phase. With ``--before PATH`` (a checkout of older
code, e.g. a worktree of main) the same URLs are timed against that code too, on the same
database, so the table shows both side by side.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from bench import dataset, server
from bench.analytics import ENDPOINTS, measure_endpoint
from bench.cold import measure_cold
from bench.config import Config
from bench.ingest import failure
from bench.procs import pg_cpu_seconds, say, tree_cpu_seconds
from bench.server import Server, sqlalchemy_url

PIPELINES = 5_000
ORG_ENDPOINTS: list[tuple[str, str, float]] = [
    ("pipeline list API, first 100", "/api/v1/pipelines?limit=100", 300.0),
    ("pipeline list API, page of 1000", "/api/v1/pipelines", 300.0),
    ("overview page (24 cards)", "/", 300.0),
    ("portfolio API, first 100 by spend", "/api/v1/portfolio?sort=spend", 300.0),
    ("weekly review page", "/review", 300.0),
    ("weekly review, last page", "/review?page=50", 300.0),
    ("weekly review CSV export (all)", "/review.csv", 300.0),
    ("/metrics scrape", "/metrics", 500.0),
    # Issue 39: the org cadence plan, warm (each pipeline's options kept between requests).
    ("org cadence plan API", "/api/v1/portfolio/plan?budget=5000000&risk=0.1", 500.0),
]


def database(cfg: Config) -> str:
    return f"cadence_bench_org_{cfg.org_runs}"


def run_org(cfg: Config, out: list[dict[str, Any]]) -> None:
    name = database(cfg)
    say(f"\n== org-wide reads on PostgreSQL ({PIPELINES:,} pipelines, {cfg.org_runs:,} runs) ==")
    try:
        info = dataset.ensure(cfg.pg, name, cfg.org_runs, cfg.rebuild, PIPELINES)
    except Exception as exc:
        out.append(failure("org", "postgresql", "dataset", 0, exc))
        say(f"  dataset FAILED: {out[-1]['error']}")
        return
    out.append({"group": "dataset", "key": "org-dataset", **info})
    say(f"  dataset: {info}")
    codes: list[tuple[str, Path | None]] = [("after", None)]
    if cfg.before is not None:
        codes.insert(0, ("before", cfg.before))
    for code, path in codes:
        say(f"  -- {code}: code at {path or server.REPO}")
        server.CODE[0] = path or server.REPO
        try:
            with Server(sqlalchemy_url(cfg.pg, name), cfg.workers, f"org-{code}") as srv:
                waited = settle(srv.pid, name)
                out.append({"group": "settle", "key": f"org-{code}:settle", **waited})
                endpoints = ORG_ENDPOINTS + [
                    (f"big pipeline: {label}", p.format(p=dataset.BIG), t)
                    for label, p, t in ENDPOINTS
                ]
                for label, url, target in endpoints:
                    measure_endpoint(cfg, srv, out, name, f"org-{code}", label, url, target)
            if cfg.cold_starts:
                measure_cold(cfg, sqlalchemy_url(cfg.pg, name), f"cold-{code}", out)
        except Exception as exc:
            out.append(failure(f"org-{code}", "postgresql", "server", 0, exc))
            say(f"  org ({code}) FAILED: {out[-1]['error']}")
        finally:
            server.CODE[0] = server.REPO


def settle(pid: int, database: str, quiet: float = 0.1, timeout: float = 240.0) -> dict[str, Any]:
    """Wait until the service is idle: its workers' warm starts (CADENCE_WARM_START) make
    every pipeline's org-wide values in background threads for ~20 s after readiness,
    and timing warm reads while they run measured their CPU, not the reads. Idle: the
    service and its database's backends under ``quiet`` of a core for three seconds in a
    row (or ``timeout``); the warm start waits on PostgreSQL while it reads."""

    def busy() -> float:
        return tree_cpu_seconds(pid) + pg_cpu_seconds(database)

    began = time.monotonic()
    calm, last = 0, busy()
    while calm < 3 and time.monotonic() - began < timeout:
        time.sleep(1.0)
        now = busy()
        calm = calm + 1 if now - last < quiet else 0
        last = now
    waited = time.monotonic() - began
    say(f"  settled: the service was idle {waited:.0f} s after readiness (warm starts done)")
    return {"settle_s": round(waited, 1), "timed_out": waited >= timeout}
