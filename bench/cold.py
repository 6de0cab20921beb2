"""A worker's first org-wide read (issue 38): the server is started afresh each time with
one worker, and the first portfolio API request is timed, either the moment `/readyz`
answers or after a pause that lets a warm start finish. Medians and the largest of
`cfg.cold_starts` starts are reported; each start is a new process, so nothing kept by an
earlier one helps."""

from __future__ import annotations

import http.client
import statistics
import time
from typing import Any

from bench.config import Config
from bench.procs import say
from bench.server import Server

URL = "/api/v1/portfolio?sort=spend"
PAUSES = (0.0, 15.0)  # at readiness; after the warm start has had time to finish


def measure_cold(cfg: Config, database_url: str, group: str, out: list[dict[str, Any]]) -> None:
    for pause in PAUSES:
        times: list[float] = []
        ready: list[float] = []
        for start in range(cfg.cold_starts):
            with Server(database_url, 1, f"{group}-cold-{start}") as srv:
                ready.append(srv.ready_s)
                time.sleep(pause)
                times.append(first_read_ms(srv.port))
        rec: dict[str, Any] = {
            "group": group,
            "backend": "postgresql",
            "name": f"first portfolio read, {pause:.0f} s after ready",
            "key": f"{group}:cold:{pause:.0f}",
            "path": URL,
            "latency_ms": {"p50": statistics.median(times), "max": max(times)},
            "starts": len(times),
            "each_ms": [round(t, 1) for t in times],
            # From the process's start to /readyz: what reading kept values before
            # serving adds (app.db.kept_snapshot), beside what it saves.
            "ready_s": {"p50": statistics.median(ready), "max": max(ready)},
            "target": "< 1000 ms",
        }
        out.append(rec)
        say(f"  cold {pause:>4.0f} s after ready: median {statistics.median(times):.0f} ms, "
            f"max {max(times):.0f} ms over {len(times)} starts, ready in "
            f"{statistics.median(ready):.1f} s")  # fmt: skip


def first_read_ms(port: int) -> float:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    began = time.perf_counter()
    conn.request("GET", URL)
    response = conn.getresponse()
    response.read()
    took = (time.perf_counter() - began) * 1000
    conn.close()
    if response.status != 200:
        raise RuntimeError(f"GET {URL}: {response.status}")
    return took
