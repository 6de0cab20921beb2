"""Benchmark databases and the real Cadence service, run as a subprocess.

The service is started the way production starts it (`cadence serve`, production
settings, a random secret, warning logs) in its own session, so that stopping it
ends the uvicorn supervisor and all its workers at once.
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import TracebackType

import psycopg
from psycopg import sql

from bench import procs
from bench.loadgen import Client

REPO = Path(__file__).resolve().parent.parent
LOG_DIR = REPO / "bench" / "results" / "logs"


class BenchError(RuntimeError):
    """A phase cannot run; the message says why."""


# ---------------------------------------------------------------- databases


def pg_conninfo(base: str, database: str) -> str:
    return f"{base.rstrip('/')}/{database}"


def sqlalchemy_url(base: str, database: str) -> str:
    url = pg_conninfo(base, database)
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def admin(base: str) -> psycopg.Connection[tuple[object, ...]]:
    return psycopg.connect(pg_conninfo(base, "postgres"), autocommit=True, connect_timeout=5)


def database_exists(base: str, name: str) -> bool:
    with admin(base) as conn:
        return (
            conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
            is not None
        )


def create_database(base: str, name: str, drop_first: bool = False) -> None:
    """CREATE DATABASE (dropping it first, other sessions and all, when asked)."""
    ident = sql.Identifier(name)
    with admin(base) as conn:
        if drop_first:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(ident))
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone() is None:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(ident))


def pg_version(base: str) -> str:
    with admin(base) as conn:
        row = conn.execute("SHOW server_version").fetchone()
    return str(row[0]) if row else "unknown"


# ---------------------------------------------------------------- the cadence command


# The checkout whose code is measured: this one, or another (`--code`, e.g. a worktree of
# main, for "before" figures) run with this virtualenv's interpreter.
CODE: list[Path] = [REPO]


def cadence_command() -> list[str]:
    script = Path(sys.executable).parent / "cadence"
    if CODE[0] == REPO and script.exists():
        return [str(script)]
    return [sys.executable, "-m", "app.cli"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cadence_env(database_url: str, port: int, workers: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CADENCE_")}
    env.update(
        CADENCE_ENVIRONMENT="production",
        CADENCE_SECRET_KEY=secrets.token_hex(32),
        CADENCE_LOG_LEVEL="warning",
        CADENCE_WORKERS=str(workers),
        CADENCE_HOST="127.0.0.1",
        CADENCE_PORT=str(port),
        CADENCE_DATABASE_URL=database_url,
        CADENCE_DEMO_ON_EMPTY="false",
    )
    if CODE[0] != REPO:
        env["PYTHONPATH"] = str(CODE[0])
    return env


def run_cadence(args: list[str], env: dict[str, str], timeout: float = 300) -> str:
    """Run a `cadence` subcommand to completion; its stdout, or BenchError with its stderr."""
    try:
        done = subprocess.run(
            [*cadence_command(), *args],
            env=env,
            cwd=CODE[0],
            capture_output=True,
            text=True,
            timeout=timeout,
            start_new_session=True,
        )
    except subprocess.TimeoutExpired as exc:
        raise BenchError(f"`cadence {' '.join(args)}` took more than {timeout:.0f} s") from exc
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
        raise BenchError(f"`cadence {' '.join(args)}` failed: {' | '.join(tail)}")
    return done.stdout


def migrate(env: dict[str, str]) -> None:
    run_cadence(["migrate"], env)


def create_token(env: dict[str, str], scope: str = "ingest") -> str:
    name = f"bench-{os.getpid()}-{secrets.token_hex(3)}"
    out = run_cadence(["token", "create", "--name", name, "--scope", scope], env, timeout=60)
    lines = out.strip().splitlines()
    if not lines or not lines[-1].startswith("cad_"):
        raise BenchError(f"`cadence token create` printed no token: {out[-300:]!r}")
    return lines[-1].strip()


# ---------------------------------------------------------------- the service


class Server:
    """`cadence serve` on a free loopback port; use as a context manager."""

    def __init__(self, database_url: str, workers: int, label: str) -> None:
        self.port = free_port()
        self.workers = workers
        self.label = label
        self.env = cadence_env(database_url, self.port, workers)
        self.proc: subprocess.Popen[bytes] | None = None
        self.ready_s = 0.0  # from the start to /readyz, once started
        LOG_DIR.mkdir(parents=True, exist_ok=True)
        self.log_path = LOG_DIR / f"server-{label}-w{workers}.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self, ready_timeout: float = 240.0) -> Server:
        log = self.log_path.open("wb")
        began = time.monotonic()
        self.proc = subprocess.Popen(
            [*cadence_command(), "serve"],
            env=self.env,
            cwd=CODE[0],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        procs.register(self.proc)
        self.ready_s = self._wait_ready(ready_timeout) - began
        return self

    def _wait_ready(self, timeout: float) -> float:
        """Wait for /readyz; when it first answered (``time.monotonic``)."""
        deadline = time.monotonic() + timeout
        client = Client("127.0.0.1", self.port, timeout=5)
        status, body = 0, b""
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise BenchError(
                    f"server ({self.label}) exited with {self.proc.returncode}: {self.log_tail()}"
                )
            status, body, _ = client.request("GET", "/readyz", headers={"Connection": "close"})
            client.close()
            if status == 200:
                ready = time.monotonic()
                # With several workers, /readyz answered by one: give the others a moment.
                time.sleep(1.0 if self.workers > 1 else 0.2)
                return ready
            time.sleep(0.25)
        raise BenchError(f"/readyz not 200 after {timeout:.0f} s ({status} {body[:200]!r})")

    def log_tail(self, lines: int = 8) -> str:
        try:
            text = self.log_path.read_text(errors="replace").strip().splitlines()
        except OSError:
            return ""
        return " | ".join(text[-lines:])

    def stop(self) -> None:
        if self.proc is not None:
            procs.kill_group(self.proc, grace=15)
            self.proc = None

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
