"""Process bookkeeping from /proc (no psutil): CPU time, peak RSS, machine facts.

Also the registry of child processes the harness started, so that every one of them
(and its process group) is ended on exit, whatever happens.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import platform
import resource
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

CLK_TCK = os.sysconf("SC_CLK_TCK")
PROC = Path("/proc")

# ---------------------------------------------------------------- output


def say(text: str = "", err: bool = False) -> None:
    """Print progress; if the reader went away (`| head`), go on silently to the report."""
    stream = sys.stderr if err else sys.stdout
    try:
        print(text, file=stream, flush=True)
    except (BrokenPipeError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        for s in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                os.dup2(devnull, s.fileno())
        os.close(devnull)


# ---------------------------------------------------------------- child processes

_children: list[subprocess.Popen[bytes]] = []


def register(proc: subprocess.Popen[bytes]) -> None:
    """Remember a child started with start_new_session=True; its group is killed at exit."""
    _children.append(proc)


def kill_group(proc: subprocess.Popen[bytes], grace: float = 10.0) -> None:
    """SIGTERM the child's process group, then SIGKILL it if it is still there."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=grace)
    # Workers may outlive the parent: the group id is the parent's pid.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    if proc.poll() is None:
        proc.wait(timeout=5)
    if proc in _children:
        _children.remove(proc)


@atexit.register
def kill_all() -> None:
    for proc in list(_children):
        kill_group(proc, grace=5.0)


def _on_signal(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def install_signal_handlers() -> None:
    """SIGTERM behaves like Ctrl-C, so finally blocks and atexit stop the servers."""
    signal.signal(signal.SIGTERM, _on_signal)


# ---------------------------------------------------------------- /proc readings


def _stat_fields(pid: int) -> list[str] | None:
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    # comm may hold spaces and parentheses: fields start after the last ')'.
    return text[text.rindex(")") + 2 :].split()


def cpu_ticks(pid: int, with_reaped: bool = True) -> int:
    """utime + stime (+ reaped children's) of one process, in clock ticks."""
    f = _stat_fields(pid)
    if f is None:
        return 0
    ticks = int(f[11]) + int(f[12])
    return ticks + (int(f[13]) + int(f[14]) if with_reaped else 0)


def all_pids() -> list[int]:
    return [int(p.name) for p in PROC.iterdir() if p.name.isdigit()]


def parents() -> dict[int, int]:
    """pid -> ppid for every process on the machine."""
    out = {}
    for pid in all_pids():
        f = _stat_fields(pid)
        if f is not None:
            out[pid] = int(f[1])
    return out


def descendants(root: int) -> list[int]:
    ppid = parents()
    found, frontier = [], [root]
    while frontier:
        nxt = [pid for pid, parent in ppid.items() if parent in frontier]
        found += nxt
        frontier = nxt
    return found


def tree_cpu_seconds(root: int) -> float:
    """CPU of a process and all its descendants (exited, reaped children included)."""
    return sum(cpu_ticks(p) for p in [root, *descendants(root)]) / CLK_TCK


def status_kib(pid: int, key: str) -> int:
    try:
        for line in (PROC / str(pid) / "status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def worker_pids(root: int) -> list[int]:
    """uvicorn's worker processes: the children when there are any, else the root itself."""
    kids = [p for p in descendants(root) if status_kib(p, "VmRSS") > 20_000]
    return kids or [root]


def rss_mib(root: int, key: str = "VmRSS") -> float:
    """Sum of VmRSS (or VmHWM: peak) over the worker processes, in MiB."""
    return sum(status_kib(p, key) for p in worker_pids(root)) / 1024.0


def reset_peak_rss(root: int) -> bool:
    """Reset VmHWM to the current RSS (Linux >= 4.0, needs ptrace rights: we are root)."""
    ok = True
    for pid in worker_pids(root):
        try:
            (PROC / str(pid) / "clear_refs").write_text("5")
        except OSError:
            ok = False
    return ok


def cmdline(pid: int) -> str:
    try:
        return (PROC / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def postmaster_pid() -> int | None:
    for pid in all_pids():
        f = _stat_fields(pid)
        if f is not None and int(f[1]) == 1 and "postgres" in cmdline(pid).split(" ")[0]:
            return pid
    return None


PG_BACKGROUND = ("checkpointer", "background writer", "walwriter", "autovacuum")


def pg_cpu_seconds(database: str) -> float:
    """CPU of PostgreSQL backends connected to `database`, plus WAL/checkpoint/autovacuum.

    Backends of other databases (other people's work on this shared server) are left out.
    """
    root = postmaster_pid()
    if root is None:
        return 0.0
    ticks = 0
    for pid in descendants(root):
        title = cmdline(pid)
        if f" {database} " in title or any(b in title for b in PG_BACKGROUND):
            ticks += cpu_ticks(pid, with_reaped=False)
    return ticks / CLK_TCK


def machine_cpu() -> tuple[float, float]:
    """(busy seconds, total seconds) summed over all CPUs since boot, from /proc/stat."""
    fields = [int(x) for x in (PROC / "stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + fields[4]
    total = sum(fields[:8])
    return (total - idle) / CLK_TCK, total / CLK_TCK


def self_cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def children_cpu_seconds() -> float:
    """CPU of reaped children (wrk is reaped between two readings of this)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


# ---------------------------------------------------------------- phase accounting


@dataclass
class Snapshot:
    wall: float
    server: float
    pg: float
    busy: float
    total: float
    bench: float
    reaped: float


def snapshot(server_pid: int | None, database: str | None) -> Snapshot:
    busy, total = machine_cpu()
    return Snapshot(
        wall=time.perf_counter(),
        server=tree_cpu_seconds(server_pid) if server_pid else 0.0,
        pg=pg_cpu_seconds(database) if database else 0.0,
        busy=busy,
        total=total,
        bench=self_cpu_seconds(),
        reaped=children_cpu_seconds(),
    )


def cpu_delta(a: Snapshot, b: Snapshot) -> dict[str, float]:
    """Seconds of CPU per party between two snapshots; `other` is what nobody here used."""
    wall = b.wall - a.wall
    busy = b.busy - a.busy
    server, pg = b.server - a.server, b.pg - a.pg
    generator = (b.bench - a.bench) + (b.reaped - a.reaped)
    cores = (b.total - a.total) / wall if wall > 0 else float(os.cpu_count() or 1)
    return {
        "wall_s": wall,
        "server_cpu_s": server,
        "pg_cpu_s": pg,
        "generator_cpu_s": generator,
        "machine_busy_pct": 100.0 * busy / (b.total - a.total) if b.total > a.total else 0.0,
        "other_cpu_s": max(0.0, busy - server - pg - generator),
        "cores_seen": cores,
    }


# ---------------------------------------------------------------- machine facts


def _run(cmd: list[str]) -> str:
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def machine_info(repo: Path) -> dict[str, object]:
    cpuinfo = (PROC / "cpuinfo").read_text()
    model = next(
        (ln.split(":", 1)[1].strip() for ln in cpuinfo.splitlines() if ln.startswith("model name")),
        "unknown",
    )
    mem_kib = next(
        int(ln.split()[1])
        for ln in (PROC / "meminfo").read_text().splitlines()
        if ln.startswith("MemTotal")
    )
    commit = _run(["git", "-C", str(repo), "rev-parse", "HEAD"])
    dirty = bool(_run(["git", "-C", str(repo), "status", "--porcelain", "--untracked-files=no"]))
    return {
        "nproc": int(_run(["nproc"]) or os.cpu_count() or 0),
        "cpu_model": model,
        "memory_gib": round(mem_kib / 1024 / 1024, 1),
        "kernel": platform.release(),
        "python": sys.version.split()[0],
        "git_commit": commit or None,
        "git_dirty": dirty if commit else None,
        "wrk": wrk_version(),
        "loadavg_at_start": loadavg(),
    }


def loadavg() -> list[str]:
    return (PROC / "loadavg").read_text().split()[:3]


def wrk_version() -> str | None:
    """wrk prints its version (and usage) when given -v; None when it is not installed."""
    try:
        done = subprocess.run(["wrk", "-v"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    first = (done.stdout or done.stderr).strip().splitlines()
    return first[0] if first else "wrk"
