"""Load generators: wrk with a Lua script (single runs), and a small keep-alive Python client.

wrk is C with one event loop per thread, so it is not the bottleneck at the rates this
machine reaches; each wrk thread stops itself after its share of the requests and the
harness then interrupts wrk (whose main thread would otherwise sleep out `-d`).
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import signal
import statistics
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from bench import data, procs

LUA_SCRIPT = r"""
local ffi = require("ffi")
ffi.cdef[[
typedef struct { long tv_sec; long tv_usec; } bench_timeval;
int gettimeofday(bench_timeval *tv, void *tz);
]]
local function now_us()
  local tv = ffi.new("bench_timeval")
  ffi.C.gettimeofday(tv, nil)
  return tonumber(tv.tv_sec) * 1000000 + tonumber(tv.tv_usec)
end
%(body_function)s
local PREFIX = "%(prefix)s"
local PATH = "%(path)s"
local QUOTA = %(quota)d
local NTHREADS = %(threads)d
local threads = {}
local next_id = 0

function setup(thread)
  thread:set("tid", next_id)
  next_id = next_id + 1
  table.insert(threads, thread)
end

function init(args)
  n, got, non2xx, sample, t0, t1 = 0, 0, 0, "", now_us(), 0
  wrk.headers["Content-Type"] = "application/json"
  wrk.headers["Authorization"] = "Bearer %(token)s"
end

function request()
  local i = n * NTHREADS + tid
  n = n + 1
  return wrk.format("POST", PATH, nil, run_body(PREFIX, i))
end

function response(status, headers, body)
  got = got + 1
  if status < 200 or status > 299 then
    non2xx = non2xx + 1
    if sample == "" then sample = status .. " " .. string.sub(body or "", 1, 300) end
  end
  if got == QUOTA then
    t1 = now_us()
    io.stdout:write("BENCH_THREAD_DONE\n")
    io.stdout:flush()
    wrk.thread:stop()
  end
end

function done(summary, latency, requests)
  local finish = now_us()
  local first, last, non, got_all, sent, samp = nil, 0, 0, 0, 0, ""
  for _, t in ipairs(threads) do
    local a, b = t:get("t0"), t:get("t1")
    if b == 0 then b = finish end
    if first == nil or a < first then first = a end
    if b > last then last = b end
    non = non + t:get("non2xx")
    got_all = got_all + t:get("got")
    sent = sent + t:get("n")
    if samp == "" then samp = t:get("sample") end
  end
  samp = string.gsub(samp, '[%%c"\\]', " ")
  local e = summary.errors
  io.write(string.format('BENCH_JSON {"responses":%%d,"sent":%%d,"non2xx":%%d,' ..
    '"elapsed_us":%%d,"p50_us":%%d,"p90_us":%%d,"p95_us":%%d,"p99_us":%%d,"max_us":%%d,' ..
    '"socket_errors":%%d,"timeouts":%%d,"sample":"%%s"}\n',
    got_all, sent, non, last - first, latency:percentile(50), latency:percentile(90),
    latency:percentile(95), latency:percentile(99), latency.max,
    e.connect + e.read + e.write, e.timeout, samp))
end
"""


def ensure_wrk() -> str | None:
    """Path of wrk, installing the Debian package when it is missing (we run as root)."""
    found = shutil.which("wrk")
    if found:
        return found
    if os.geteuid() == 0 and shutil.which("apt-get"):
        procs.say("wrk not found: apt-get install -y wrk")
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        cmd = ["apt-get", "install", "-y", "-q", "wrk"]
        if subprocess.run(cmd, env=env, capture_output=True, timeout=300).returncode != 0:
            subprocess.run(["apt-get", "update", "-q"], env=env, capture_output=True, timeout=300)
            subprocess.run(cmd, env=env, capture_output=True, timeout=300)
    return shutil.which("wrk")


@dataclass
class LoadResult:
    requests: int = 0
    ok: int = 0
    errors: int = 0
    elapsed_s: float = 0.0
    latencies_ms: dict[str, float] = field(default_factory=dict)
    generator: str = ""
    generator_cpu_s: float = 0.0
    error_sample: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def run_wrk(
    url: str,
    path: str,
    token: str,
    prefix: str,
    requests: int,
    connections: int,
    time_limit: float,
) -> LoadResult:
    """POST `requests` unique single runs at `connections` concurrency (bounded by time)."""
    wrk = ensure_wrk()
    if wrk is None:
        raise RuntimeError("wrk is not installed and apt-get install wrk failed")
    threads = min(connections, os.cpu_count() or 2)
    quota = -(-requests // threads)
    script = LUA_SCRIPT % {
        "body_function": data.lua_body_function(),
        "prefix": prefix,
        "path": path,
        "quota": quota,
        "threads": threads,
        "token": token,
    }
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
        f.write(script)
    os.chmod(f.name, 0o600)
    cmd = [
        wrk,
        f"-t{threads}",
        f"-c{connections}",
        f"-d{int(time_limit)}s",
        "--timeout",
        "30s",
        "--latency",
        "-s",
        f.name,
        url,
    ]
    reaped0 = procs.children_cpu_seconds()
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    procs.register(proc)  # type: ignore[arg-type]

    def overdue() -> None:  # wrk did not stop by itself: end it
        if proc.poll() is None:
            proc.kill()

    killer = threading.Timer(time_limit + 30, overdue)
    killer.start()
    lines, finished = [], 0
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("BENCH_THREAD_DONE"):
                finished += 1
                if finished == threads:
                    proc.send_signal(signal.SIGINT)
        stderr = proc.stderr.read() if proc.stderr else ""
        proc.wait(timeout=30)
    finally:
        killer.cancel()
        procs.kill_group(proc, grace=2)  # type: ignore[arg-type]
        os.unlink(f.name)
    summary = next((ln for ln in lines if ln.startswith("BENCH_JSON ")), None)
    if summary is None:
        raise RuntimeError(f"wrk printed no summary: {''.join(lines)[-500:]} {stderr[-500:]}")
    s = json.loads(summary[len("BENCH_JSON ") :])
    errors = s["non2xx"] + s["socket_errors"] + s["timeouts"]
    return LoadResult(
        requests=s["responses"],
        ok=s["responses"] - s["non2xx"],
        errors=errors,
        elapsed_s=s["elapsed_us"] / 1e6,
        latencies_ms={k: s[f"{k}_us"] / 1000 for k in ("p50", "p90", "p95", "p99", "max")},
        generator=f"wrk -t{threads} -c{connections}",
        generator_cpu_s=procs.children_cpu_seconds() - reaped0,
        error_sample=s["sample"],
        extra={"sent": s["sent"], "wrk_text": "".join(ln for ln in lines if "%" in ln)},
    )


def percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {}
    v = sorted(values)

    def pick(q: float) -> float:
        return v[min(len(v) - 1, max(0, round(q / 100 * len(v) + 0.5) - 1))]

    return {
        "p50": statistics.median(v),
        "p90": pick(90),
        "p95": pick(95),
        "p99": pick(99),
        "max": v[-1],
    }


class Client:
    """One kept-alive HTTP/1.1 connection (reconnects after an error or `close`)."""

    def __init__(self, host: str, port: int, timeout: float = 60.0) -> None:
        self.host, self.port, self.timeout = host, port, timeout
        self.conn: http.client.HTTPConnection | None = None

    def request(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, bytes, float]:
        """(status, body, seconds); status 0 on a connection error (body says why)."""
        if self.conn is None:
            self.conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        t0 = time.perf_counter()
        try:
            self.conn.request(method, path, body=body, headers=headers or {})
            resp = self.conn.getresponse()
            payload = resp.read()
            elapsed = time.perf_counter() - t0
            if resp.will_close:
                self.close()
            return resp.status, payload, elapsed
        except (OSError, http.client.HTTPException) as exc:
            self.close()
            return 0, repr(exc).encode(), time.perf_counter() - t0

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def post_bodies(
    host: str,
    port: int,
    token: str,
    path: str,
    bodies: list[bytes],
    runs_per_body: int,
    concurrency: int,
    time_limit: float,
) -> LoadResult:
    """POST pre-built bodies from `concurrency` threads, each on its own kept-alive connection."""
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}
    lock = threading.Lock()
    state: dict[str, Any] = {"next": 0, "lat": [], "ok": 0, "err": 0, "sample": ""}
    deadline = time.perf_counter() + time_limit

    def worker() -> None:
        client = Client(host, port, timeout=min(120.0, time_limit + 10))
        try:
            while time.perf_counter() < deadline:
                with lock:
                    index = state["next"]
                    if index >= len(bodies):
                        return
                    state["next"] += 1
                status, payload, secs = client.request("POST", path, bodies[index], headers)
                with lock:
                    state["lat"].append(secs * 1000)
                    if 200 <= status < 300:
                        state["ok"] += 1
                    else:
                        state["err"] += 1
                        state["sample"] = state["sample"] or f"{status} {payload[:300]!r}"
        finally:
            client.close()

    cpu0, t0 = procs.self_cpu_seconds(), time.perf_counter()
    pool = [threading.Thread(target=worker, daemon=True) for _ in range(concurrency)]
    for t in pool:
        t.start()
    for t in pool:
        t.join(timeout=time_limit + 130)
    elapsed = time.perf_counter() - t0
    return LoadResult(
        requests=state["ok"] + state["err"],
        ok=state["ok"],
        errors=state["err"],
        elapsed_s=elapsed,
        latencies_ms=percentiles(state["lat"]),
        generator=f"python http.client x{concurrency} threads",
        generator_cpu_s=procs.self_cpu_seconds() - cpu0,
        error_sample=state["sample"],
        extra={"runs_per_request": runs_per_body},
    )


def sequential_get(
    host: str,
    port: int,
    path: str,
    count: int,
    warmup: int,
    time_limit: float,
    keep_alive: bool = True,
) -> LoadResult:
    """Time `count` GETs one after another (after `warmup` untimed ones) on one connection."""
    client = Client(host, port)
    headers = {} if keep_alive else {"Connection": "close"}
    lat, ok, err, sample, size = [], 0, 0, "", 0
    deadline = time.perf_counter() + time_limit
    cpu0, t0 = procs.self_cpu_seconds(), time.perf_counter()
    for n in range(warmup + count):
        if time.perf_counter() > deadline:
            break
        status, payload, secs = client.request("GET", path, headers=headers)
        if not keep_alive:
            client.close()
        if n < warmup:
            continue
        lat.append(secs * 1000)
        size = len(payload)
        if status == 200:
            ok += 1
        else:
            err += 1
            sample = sample or f"{status} {payload[:300]!r}"
    client.close()
    return LoadResult(
        requests=ok + err,
        ok=ok,
        errors=err,
        elapsed_s=time.perf_counter() - t0,
        latencies_ms=percentiles(lat),
        generator="python http.client, sequential",
        generator_cpu_s=procs.self_cpu_seconds() - cpu0,
        error_sample=sample,
        extra={"response_bytes": size, "keep_alive": keep_alive},
    )
