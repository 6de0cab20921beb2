"""Analytics phase: sequential reads of the planning endpoints on a 1M-run database.

Each endpoint gets warm-up requests, then timed ones one after another on one kept-alive
connection (p50/p95/p99), plus a few on a new connection each (to tell Nagle's ~40 ms
from the application's own time). Memory: worker RSS after reading a 100-run pipeline
and after reading the 10,000-run one, and the peak (VmHWM) over the phase.
"""

from __future__ import annotations

from typing import Any

from bench import dataset, procs
from bench.config import Config
from bench.ingest import failure
from bench.loadgen import sequential_get
from bench.measure import Meter, healthz_probe
from bench.procs import say
from bench.server import Server, sqlalchemy_url

ENDPOINTS: list[tuple[str, str, float]] = [
    ("projection", "/api/v1/pipelines/{p}/projection", 100.0),
    ("goodput 52 weeks", "/api/v1/pipelines/{p}/goodput?weeks=52", 100.0),
    ("gate", "/api/v1/pipelines/{p}/gate?budget=100000", 100.0),
    ("scaling", "/api/v1/pipelines/{p}/scaling", 100.0),
    ("checkpoints", "/api/v1/pipelines/{p}/checkpoints", 100.0),
    ("levers", "/api/v1/pipelines/{p}/levers", 100.0),
    ("forecast record 24 months", "/api/v1/pipelines/{p}/forecast-record?months=24", 200.0),
    ("run list limit=1000", "/api/v1/runs?pipeline={p}&limit=1000", 50.0),
    ("HTML page", "/pipelines/{p}", 100.0),
]


def run_analytics(cfg: Config, out: list[dict[str, Any]]) -> None:
    say(f"\n== analytics on PostgreSQL ({cfg.dataset_runs:,} runs) ==")
    try:
        info = dataset.ensure(cfg.pg, cfg.analytics_db, cfg.dataset_runs, cfg.rebuild)
    except Exception as exc:
        out.append(failure("analytics", "postgresql", "dataset", 0, exc))
        say(f"  dataset FAILED: {out[-1]['error']}")
        return
    out.append({"group": "dataset", "key": "dataset", **info})
    say(f"  dataset: {info}")
    try:
        with Server(sqlalchemy_url(cfg.pg, cfg.analytics_db), cfg.workers, "analytics") as srv:
            _measure(cfg, srv, out)
    except Exception as exc:
        out.append(failure("analytics", "postgresql", "server", 0, exc))
        say(f"  analytics FAILED: {out[-1]['error']}")


def measure_endpoint(
    cfg: Config,
    srv: Server,
    out: list[dict[str, Any]],
    database: str,
    group: str,
    label: str,
    url: str,
    target: float,
) -> None:
    """Warm-ups, then timed sequential GETs of one URL (p50/p95/p99, server and PG CPU per
    request), plus a few on a new connection each; one record appended to ``out``."""
    count, warmup, limit = cfg.reads
    try:
        meter = Meter(srv.pid, database)
        meter.start()
        load = sequential_get("127.0.0.1", srv.port, url, count, warmup, limit)
        meter.stop()
        rec = meter.record(load, runs=load.requests)
        fresh = sequential_get(
            "127.0.0.1", srv.port, url, max(5, count // 5), 0, limit, keep_alive=False
        )
        p95 = rec["latency_ms"].get("p95", float("inf"))
        rec.update(
            group=group,
            backend="postgresql",
            name=label,
            key=f"{group}:{label}",
            path=url,
            repeat=0,
            target=f"p95 < {target:.0f} ms",
            target_ms=target,
            status="PASS" if p95 < target and not load.errors else "MISS",
            p50_new_connection_ms=fresh.latencies_ms.get("p50"),
            response_bytes=load.extra.get("response_bytes"),
            server_cpu_ms_per_request=rec.pop("server_cpu_ms_per_run"),
            pg_cpu_ms_per_request=rec.pop("pg_cpu_ms_per_run"),
        )
    except Exception as exc:
        rec = failure(group, "postgresql", label, 0, exc)
    out.append(rec)
    if rec.get("error"):
        say(f"  {label}: FAILED {rec['error']}")
        return
    lat = rec["latency_ms"]
    say(
        f"  {label}: p50 {lat.get('p50', 0):.1f} / p95 {lat.get('p95', 0):.1f} ms "
        f"(new conn p50 {rec['p50_new_connection_ms'] or 0:.1f}), "
        f"server {rec['server_cpu_ms_per_request']:.1f} ms CPU/req, "
        f"{rec['response_bytes'] or 0:,} B, errors {rec['errors']} {rec['status']}"
    )


def _measure(cfg: Config, srv: Server, out: list[dict[str, Any]]) -> None:
    probe = healthz_probe("127.0.0.1", srv.port, cfg.workers, "analytics", cfg.healthz)
    out.append(probe)
    say(
        f"  {probe['name']}: {probe['p50_ms']:.2f} ms "
        f"(new connection: {probe['p50_new_connection_ms']:.2f} ms)"
    )
    limit = cfg.reads[2]
    # Memory after the small pipeline only, then after the big one.
    small_errors = 0
    for _, path, _ in ENDPOINTS:
        r = sequential_get("127.0.0.1", srv.port, path.format(p=dataset.SMALL), 3, 1, limit)
        small_errors += r.errors
    rss_small = procs.rss_mib(srv.pid)
    procs.reset_peak_rss(srv.pid)
    database = cfg.analytics_db
    for label, path, target in ENDPOINTS:
        measure_endpoint(
            cfg, srv, out, database, "analytics", label, path.format(p=dataset.BIG), target
        )
    rss_big = procs.rss_mib(srv.pid)
    peak = procs.rss_mib(srv.pid, "VmHWM")
    growth = rss_big - rss_small
    out.append(
        {
            "group": "memory",
            "backend": "postgresql",
            "key": "analytics:memory",
            "name": "worker RSS: small pipeline -> big pipeline",
            "rss_after_small_mib": round(rss_small, 1),
            "rss_after_big_mib": round(rss_big, 1),
            "growth_mib": round(growth, 1),
            "peak_rss_mib": round(peak, 1),
            "small_pipeline_errors": small_errors,
            "workers": len(procs.worker_pids(srv.pid)),
            "target": "growth < 50 MiB",
            "status": "PASS" if growth < 50 else "MISS",
        }
    )
    say(
        f"  RSS after small pipeline {rss_small:.0f} MiB, after big {rss_big:.0f} MiB, "
        f"peak {peak:.0f} MiB (summed over workers)"
    )
