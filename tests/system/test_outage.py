"""Fault tolerance: a PostgreSQL outage under a real `cadence serve`, and query timeouts.

``test_a_postgresql_outage_loses_no_run`` starts a throwaway PostgreSQL cluster (initdb,
pg_ctl; as the ``postgres`` OS user when the suite runs as root), migrates it, serves it
with ``cadence serve`` and posts runs through :class:`cadence_client.CadenceClient` while
PostgreSQL is stopped for ~3 s. It runs in the PostgreSQL pass only; there, missing
PostgreSQL binaries skip it loudly, or fail it when ``CADENCE_REQUIRE_POSTGRES=1``.

The error-mapping tests (which database errors answer 503 rather than 500) need no
PostgreSQL and run in both passes.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shlex
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from cadence_client import CadenceClient
from fastapi import Request
from fastapi.testclient import TestClient
from sqlalchemy import Engine, text
from sqlalchemy.exc import DBAPIError, IntegrityError, InterfaceError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from app.db.engine import Database, make_engine
from app.main import create_app
from app.security import authenticator
from app.settings import Settings
from tests.conftest import BACKEND
from tests.fixtures.builders import make_run
from tests.fixtures.security import token_settings
from tests.fixtures.serving import Served, free_port

PG_ONLY = pytest.mark.skipif(
    BACKEND != "postgresql",
    reason="runs in the PostgreSQL pass only (CADENCE_TEST_BACKEND=postgresql)",
)

N_RUNS = 200
OUTAGE_AFTER = 50  # runs stored before PostgreSQL goes down
OUTAGE_SECONDS = 3.0
PROBE_TIMEOUT = 5.0
TIMEOUT_MESSAGE = "the query took longer than the database's statement timeout; narrow the request"
UNAVAILABLE_MESSAGE = "the database is unavailable; retry shortly"


# -- a throwaway PostgreSQL cluster ------------------------------------------------------


def postgres_bindir() -> Path | None:
    """The newest ``/usr/lib/postgresql/*/bin`` with initdb and pg_ctl, else PATH's."""

    def version(path: str) -> tuple[int, ...]:
        number = Path(path).parent.name
        return tuple(int(p) for p in number.split(".") if p.isdigit())

    for bindir in sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=version, reverse=True):
        if all(os.access(Path(bindir) / tool, os.X_OK) for tool in ("initdb", "pg_ctl")):
            return Path(bindir)
    initdb = shutil.which("initdb")
    if initdb and shutil.which("pg_ctl"):
        return Path(initdb).resolve().parent
    return None


class Cluster:
    """initdb/pg_ctl on a temporary directory; ``as_postgres`` when running as root
    (initdb refuses root), through ``runuser`` or ``su``."""

    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        self.root = Path(tempfile.mkdtemp(prefix="cadence-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "postgresql.log"
        self.port = free_port()
        self.as_postgres = os.geteuid() == 0
        if self.as_postgres:
            user = pwd.getpwnam("postgres")  # KeyError: no postgres user to run as
            os.chown(self.root, user.pw_uid, user.pw_gid)

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/cadence"

    def dsn(self, dbname: str = "cadence") -> str:
        return f"host=127.0.0.1 port={self.port} user=postgres dbname={dbname}"

    def run(self, tool: str, *args: str, timeout: float = 60) -> str:
        cmd = [str(self.bindir / tool), *args]
        if self.as_postgres:
            if shutil.which("runuser"):
                cmd = ["runuser", "-u", "postgres", "--", *cmd]
            else:
                cmd = ["su", "postgres", "-s", "/bin/sh", "-c", shlex.join(cmd)]
        done = subprocess.run(
            cmd,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(
                f"{shlex.join(cmd)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
                f"\n--- server log ---\n{self.server_log()}"
            )
        return done.stdout

    def init(self) -> None:
        self.run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "--no-sync")
        self.start()
        with psycopg.connect(self.dsn("postgres"), autocommit=True) as conn:
            conn.execute("CREATE DATABASE cadence")

    def start(self) -> None:
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1"
        self.run("pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.log), "-w", "start")

    def stop(self, mode: str = "fast") -> None:
        self.run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")

    def server_log(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-4000:]
        except OSError:
            return "(no log)"

    def destroy(self) -> None:
        if (self.data / "postmaster.pid").exists():
            with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
                self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    bindir = postgres_bindir()
    if bindir is None:
        message = (
            "PostgreSQL outage test NOT RUN: initdb/pg_ctl not found under "
            "/usr/lib/postgresql/*/bin or on PATH (install the postgresql server package)"
        )
        if os.environ.get("CADENCE_REQUIRE_POSTGRES") == "1":
            pytest.fail(message + "; CADENCE_REQUIRE_POSTGRES=1")
        pytest.skip(message)
    cluster = Cluster(bindir)
    try:
        cluster.init()
        yield cluster
    finally:
        cluster.destroy()


# -- the service under test ---------------------------------------------------------------


# -- the client side ----------------------------------------------------------------------


class Recording(httpx.BaseTransport):
    """An HTTP transport that notes every status (and transport error) the client met."""

    def __init__(self) -> None:
        self.inner = httpx.HTTPTransport()
        self.statuses: list[int] = []
        self.errors: list[str] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        try:
            response = self.inner.handle_request(request)
        except httpx.TransportError as exc:
            self.errors.append(type(exc).__name__)
            raise
        self.statuses.append(response.status_code)
        return response

    def close(self) -> None:
        self.inner.close()


class Poster(threading.Thread):
    """Posts the runs one at a time; after ``pause_at`` runs it waits for ``resume``."""

    def __init__(self, base_url: str, token: str, runs: list[dict[str, Any]], pause_at: int):
        super().__init__(daemon=True, name="poster")
        self.base_url, self.token, self.runs, self.pause_at = base_url, token, runs, pause_at
        self.paused = threading.Event()
        self.resume = threading.Event()
        self.transport = Recording()
        self.stored = 0
        self.error: BaseException | None = None
        self.slowest = 0.0

    def run(self) -> None:
        try:
            with CadenceClient(
                self.base_url,
                self.token,
                timeout=PROBE_TIMEOUT,
                backoff_base=0.05,
                backoff_max=1,
                max_attempts=60,
                transport=self.transport,
            ) as client:
                for i, run in enumerate(self.runs):
                    if i == self.pause_at:
                        self.paused.set()
                        self.resume.wait(30)
                    start = time.monotonic()
                    client.post_run(run)
                    self.slowest = max(self.slowest, time.monotonic() - start)
                    self.stored += 1
        except BaseException as exc:
            self.error = exc


@dataclass
class Probe:
    path: str
    status: int | None  # None: no answer within PROBE_TIMEOUT (or a transport error)
    seconds: float
    retry_after: str | None = None
    body: Any = None
    failure: str | None = None


def probe(http: httpx.Client, method: str, path: str, **kwargs: Any) -> Probe:
    start = time.monotonic()
    try:
        r = http.request(method, path, **kwargs)
    except httpx.HTTPError as exc:
        return Probe(path, None, time.monotonic() - start, failure=repr(exc))
    try:
        body = r.json()
    except ValueError:
        body = r.text[:300]
    return Probe(path, r.status_code, time.monotonic() - start, r.headers.get("Retry-After"), body)


# -- the outage ---------------------------------------------------------------------------


@PG_ONLY
def test_a_postgresql_outage_loses_no_run(cluster: Cluster) -> None:
    began = time.monotonic()
    service = Served(cluster.url, cluster.root / "cadence.log")
    try:
        service.cadence("migrate")
        token = service.create_token("outage", "ingest")
        startup = service.start()
        runs = [
            make_run(pipeline="outage", run_id=f"outage-{i:03d}", tags={"i": str(i)})
            for i in range(N_RUNS)
        ]
        poster = Poster(service.base_url, token, runs, pause_at=OUTAGE_AFTER)
        poster.start()
        assert poster.paused.wait(30), f"the poster did not reach {OUTAGE_AFTER} runs"
        assert poster.stored == OUTAGE_AFTER

        auth = {"Authorization": f"Bearer {token}"}
        probes: list[Probe] = []
        with httpx.Client(base_url=service.base_url, timeout=PROBE_TIMEOUT) as http:
            # -- PostgreSQL down ------------------------------------------------------
            cluster.stop("fast")
            down_at = time.monotonic()
            poster.resume.set()  # run 51 goes out while the database is down
            n = 0
            while time.monotonic() - down_at < OUTAGE_SECONDS:
                n += 1
                probe_run = make_run(pipeline="probe", run_id=f"probe-{n}")
                probes.append(probe(http, "POST", "/api/v1/runs", json=probe_run, headers=auth))
                probes.append(probe(http, "GET", "/readyz"))
                probes.append(probe(http, "GET", "/healthz"))
                time.sleep(0.2)
            stored_during_outage = poster.stored

            # -- PostgreSQL back ------------------------------------------------------
            cluster.start()
            back_at = time.monotonic()
            recovery = service.wait_ready(timeout=20)
            after = probe(
                http, "POST", "/api/v1/runs", json=make_run(pipeline="probe"), headers=auth
            )
            assert service.proc.poll() is None, "the service was not supposed to restart"

        poster.join(45)
        assert not poster.is_alive(), f"the poster is stuck at {poster.stored} runs"
        blip = restart_without_traffic(service, cluster, auth)

        with psycopg.connect(cluster.dsn()) as conn:
            stored = [
                row[0]
                for row in conn.execute(
                    "SELECT r.run_id FROM run r JOIN pipeline p ON p.id = r.pipeline_id"
                    " WHERE p.name = 'outage' ORDER BY r.run_id"
                )
            ]

        posts = [p for p in probes if p.path == "/api/v1/runs"]
        readyz = [p for p in probes if p.path == "/readyz"]
        healthz = [p for p in probes if p.path == "/healthz"]
        summary = " ".join(
            [
                f"startup {startup:.2f}s; outage {back_at - down_at:.2f}s;",
                f"{len(posts)} probe rounds: POST {statuses(posts)} (slowest {slowest(posts)}),",
                f"/readyz {statuses(readyz)} (slowest {slowest(readyz)}),",
                f"/healthz {statuses(healthz)};",
                f"/readyz 200 {recovery:.2f}s after `pg_ctl start` returned;",
                f"client saw {count(poster.transport.statuses)},",
                f"transport errors {poster.transport.errors},",
                f"slowest post_run {poster.slowest:.2f}s;",
                f"restart without traffic: POSTs {[p.status for p in blip]};",
                f"runs stored {len(stored)} ({len(set(stored))} distinct);",
                f"total {time.monotonic() - began:.1f}s",
            ]
        )
        print("\nOUTAGE:", summary)

        assert poster.error is None, f"the client gave up: {poster.error!r}\n{summary}"
        assert stored_during_outage == OUTAGE_AFTER, "a run was stored while the database was down"
        for p in probes:
            assert p.status is not None, f"{p.path} gave no answer in {PROBE_TIMEOUT}s: {p.failure}"
            assert p.seconds < PROBE_TIMEOUT
        for p in posts:
            assert p.status == 503, f"POST during the outage: {p}\n{service.output()}"
            assert p.retry_after is not None and int(p.retry_after) > 0, p
            assert p.body["error"]["code"] == "database_unavailable", p
            assert p.body["error"]["message"] == UNAVAILABLE_MESSAGE, p
        for p in readyz:
            assert p.status == 503, p
            assert p.body["database"] == "unreachable", p
        assert all(p.status == 200 for p in healthz), healthz
        assert after.status == 201, after
        assert 503 in poster.transport.statuses, "the client never met the outage"
        assert 500 not in poster.transport.statuses, service.output()
        assert "unhandled error" not in service.output(), service.output()
        assert poster.stored == N_RUNS
        # Stale pooled connections fail one request (503), then the pool is renewed.
        assert all(p.status in (503, 201) for p in blip), blip
        assert blip[-1].status == 201 and len(blip) <= 3, blip
        assert stored == sorted(r["run_id"] for r in runs)  # none lost, none doubled
    finally:
        service.stop()


def restart_without_traffic(service: Served, cluster: Cluster, auth: dict[str, str]) -> list[Probe]:
    """Fill the pool, restart PostgreSQL while idle, then POST until one is stored.

    No request sees the outage, so every pooled connection is stale when traffic
    resumes (there is no pre-ping): the first request fails with 503, SQLAlchemy
    invalidates the pool, and the next one is stored.
    """
    with httpx.Client(base_url=service.base_url, timeout=PROBE_TIMEOUT) as http:
        with ThreadPoolExecutor(8) as pool:  # several connections in the pool
            list(pool.map(lambda _: http.get("/api/v1/runs?limit=1"), range(16)))
        cluster.stop("fast")
        cluster.start()
        probes: list[Probe] = []
        for n in range(5):
            run = make_run(pipeline="probe", run_id=f"blip-{n}")
            probes.append(probe(http, "POST", "/api/v1/runs", json=run, headers=auth))
            if probes[-1].status == 201:
                break
    return probes


def statuses(probes: list[Probe]) -> dict[str, int]:
    return count([p.status for p in probes])


def slowest(probes: list[Probe]) -> str:
    return f"{max(p.seconds for p in probes):.3f}s"


def count(items: list[Any]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for item in items:
        counts[str(item)] = counts.get(str(item), 0) + 1
    return counts


# -- statement timeout ---------------------------------------------------------------------


@PG_ONLY
def test_the_statement_timeout_cancels_a_slow_query(database_url: str) -> None:
    engine = make_engine(Settings(database_url=database_url, db_statement_timeout_ms=200))
    try:
        # QueryCanceled, not a result: the server cut the 1 s sleep at the timeout. (No
        # clock assertion: a loaded CI machine can stretch any wall-clock bound.)
        # A raw connection on purpose: the driver's error is what is checked.
        with pytest.raises(OperationalError) as info, engine.connect() as conn:
            conn.execute(text("SELECT pg_sleep(1)"))
        assert isinstance(info.value.orig, psycopg.errors.QueryCanceled)
        with engine.connect() as conn:  # the connection stays usable
            assert conn.execute(text("SELECT 1")).scalar() == 1
    finally:
        engine.dispose()


@PG_ONLY
def test_a_request_over_the_statement_timeout_answers_503(
    engine: Engine, settings: Settings
) -> None:
    # ``engine`` has migrated the test database; the app makes its own engine from these
    # settings, so its connections carry the 200 ms statement_timeout.
    app = create_app(settings.model_copy(update={"db_statement_timeout_ms": 200}))

    @app.get("/api/v1/slow")
    def slow(request: Request) -> dict[str, str]:
        with request.app.state.database.read() as session:
            session.execute(text("SELECT pg_sleep(1)"))
        return {"status": "finished"}

    with TestClient(app) as client:
        r = client.get("/api/v1/slow")
    # 503, not {"status": "finished"}: the statement was cancelled at the timeout.
    assert r.status_code == 503
    assert r.headers["Retry-After"]
    assert r.json()["error"] == {"code": "statement_timeout", "message": TIMEOUT_MESSAGE}


# -- which database errors answer 503 -----------------------------------------------------


def _refused() -> Exception:
    return psycopg.OperationalError("connection failed: Connection refused")


ERRORS: dict[str, tuple[Exception, int, str]] = {
    "query cancelled": (
        OperationalError(
            "SELECT pg_sleep(1)",
            {},
            psycopg.errors.QueryCanceled("canceling statement due to statement timeout"),
        ),
        503,
        "statement_timeout",
    ),
    "connection refused": (
        OperationalError(None, None, _refused()),
        503,
        "database_unavailable",
    ),
    "connection closed": (
        InterfaceError("SELECT 1", {}, psycopg.InterfaceError("the connection is closed")),
        503,
        "database_unavailable",
    ),
    "connection invalidated": (
        DBAPIError("SELECT 1", {}, psycopg.DatabaseError("lost"), connection_invalidated=True),
        503,
        "database_unavailable",
    ),
    "pool exhausted": (PoolTimeout("QueuePool limit reached"), 503, "database_unavailable"),
    "integrity error": (
        IntegrityError("INSERT", {}, psycopg.errors.UniqueViolation("duplicate key")),
        500,
        "internal_error",
    ),
    "other driver error": (
        DBAPIError("SELECT", {}, psycopg.errors.DivisionByZero("division by zero")),
        500,
        "internal_error",
    ),
}


@pytest.mark.parametrize("case", list(ERRORS))
def test_database_errors_that_mean_retry_later_answer_503(
    case: str, db: Database, settings: Settings
) -> None:
    error, status, code = ERRORS[case]
    app = create_app(settings, database=db)

    @app.get("/api/v1/boom")
    def boom() -> None:
        raise error

    with TestClient(app, raise_server_exceptions=False) as client:
        r = client.get("/api/v1/boom")
    assert r.status_code == status, r.text
    if status == 500:  # still raised to the server (logged with its traceback), as before
        with TestClient(app) as client, pytest.raises(type(error)):
            client.get("/api/v1/boom")
    assert r.json()["error"]["code"] == code
    if status == 503:
        assert int(r.headers["Retry-After"]) > 0
        expected = TIMEOUT_MESSAGE if code == "statement_timeout" else UNAVAILABLE_MESSAGE
        assert r.json()["error"]["message"] == expected


@pytest.mark.parametrize("case", ["query cancelled", "connection refused", "pool exhausted"])
def test_the_read_gate_answers_the_handlers_503(
    case: str, db: Database, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The token-mode gate answers before the routes and their handlers; its 503 is the
    same body (one function builds it), statement timeout included."""
    error, _, code = ERRORS[case]

    async def down(request: Request, scope: str) -> None:
        raise error

    monkeypatch.setattr(authenticator, "credential", down)
    app = create_app(token_settings(database_url), database=db)
    with TestClient(app) as client:
        r = client.get("/api/v1/pipelines", headers={"Authorization": "Bearer cad_x"})
    assert r.status_code == 503, r.text
    assert r.headers["Retry-After"] == "5"
    expected = TIMEOUT_MESSAGE if code == "statement_timeout" else UNAVAILABLE_MESSAGE
    assert r.json() == {"error": {"code": code, "message": expected}}
