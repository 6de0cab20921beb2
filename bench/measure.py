"""Turning one load (what the client saw) plus /proc deltas (what it cost) into a record."""

from __future__ import annotations

from typing import Any

from bench import procs
from bench.loadgen import LoadResult, sequential_get


class Meter:
    """CPU of server, PostgreSQL (our database only), generator and the rest, over a phase."""

    def __init__(self, server_pid: int | None, database: str | None) -> None:
        self.server_pid = server_pid
        self.database = database
        self.before: procs.Snapshot | None = None
        self.after: procs.Snapshot | None = None
        self.peak_reset = False

    def start(self) -> None:
        if self.server_pid:
            self.peak_reset = procs.reset_peak_rss(self.server_pid)
        self.before = procs.snapshot(self.server_pid, self.database)

    def stop(self) -> None:
        self.after = procs.snapshot(self.server_pid, self.database)

    def record(self, load: LoadResult, runs: int, **fields: Any) -> dict[str, Any]:
        """A phase record; `runs` is what was stored (or requests, for reads)."""
        assert self.before is not None and self.after is not None
        cpu = procs.cpu_delta(self.before, self.after)
        per = max(runs, 1)
        rec: dict[str, Any] = {
            **fields,
            "runs": runs,
            "requests": load.requests,
            "errors": load.errors,
            "error_sample": load.error_sample or None,
            "elapsed_s": round(load.elapsed_s, 3),
            "runs_per_s": runs / load.elapsed_s if load.elapsed_s > 0 else 0.0,
            "latency_ms": {k: round(v, 3) for k, v in load.latencies_ms.items()},
            "generator": load.generator,
            "generator_cpu_s": round(cpu["generator_cpu_s"], 3),
            "generator_core_pct": round(100 * cpu["generator_cpu_s"] / cpu["wall_s"], 1)
            if cpu["wall_s"]
            else None,
            "server_cpu_ms_per_run": 1000 * cpu["server_cpu_s"] / per if self.server_pid else None,
            "pg_cpu_ms_per_run": 1000 * cpu["pg_cpu_s"] / per if self.database else None,
            "server_cpu_s": round(cpu["server_cpu_s"], 3),
            "pg_cpu_s": round(cpu["pg_cpu_s"], 3),
            "other_cpu_s": round(cpu["other_cpu_s"], 3),
            # Cores used by processes that are not ours (other people's work on the box).
            "other_cores": round(cpu["other_cpu_s"] / cpu["wall_s"], 2) if cpu["wall_s"] else None,
            "machine_busy_pct": round(cpu["machine_busy_pct"], 1),
            "extra": load.extra,
        }
        if self.server_pid:
            rec["peak_rss_mib"] = round(procs.rss_mib(self.server_pid, "VmHWM"), 1)
            rec["peak_rss_is_per_phase"] = self.peak_reset
        return rec


def healthz_probe(host: str, port: int, workers: int, label: str, count: int) -> dict[str, Any]:
    """GET /healthz one at a time: on one kept-alive connection, then a new one each time.

    With Nagle's algorithm left on by the server, every request after the first on a
    connection waits for the client's delayed ACK (~40 ms); a new connection does not.
    """
    kept = sequential_get(host, port, "/healthz", count, warmup=1, time_limit=30)
    fresh = sequential_get(host, port, "/healthz", max(10, count // 4), 0, 30, keep_alive=False)
    p50 = kept.latencies_ms.get("p50", float("nan"))
    return {
        "group": "latency",
        "backend": label,
        "name": f"/healthz p50 c=1 keep-alive (workers={workers})",
        "key": f"healthz.w{workers}.{label}",
        "workers": workers,
        "p50_ms": p50,
        "p95_ms": kept.latencies_ms.get("p95"),
        "p50_new_connection_ms": fresh.latencies_ms.get("p50"),
        "requests": kept.requests,
        "errors": kept.errors + fresh.errors,
        "error_sample": kept.error_sample or fresh.error_sample or None,
        "target": "p50 < 5 ms",
        "status": "PASS" if p50 < 5 and not kept.errors else "MISS",
    }
