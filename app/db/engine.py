"""Engines and sessions. The request's session owns its transaction."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NewType

from psycopg.types.json import set_json_loads
from pydantic_core import from_json
from sqlalchemy import Connection, Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session, sessionmaker

from app.db.kept import KEEPS, STORE, KeptStore
from app.planning.budget_status import StatusThresholds
from app.settings import Settings

WRITE = {"cadence_write": True}
# The info a read unit of work adds: only its sessions keep values between requests
# (``app.db.kept.KeptMap``), even in tests where reads and writes share one sessionmaker.
READER = {KEEPS: True}
THRESHOLDS = "cadence_status_thresholds"  # the session.info key of Database.status_thresholds


def make_engine(settings: Settings, url: str | None = None, **overrides: Any) -> Engine:
    url = url or settings.database_url
    if make_url(url).get_backend_name() == "sqlite":
        return _sqlite_engine(settings, url, **overrides)
    connect_args: dict[str, Any] = {"connect_timeout": 5}
    # Sessions in UTC, whatever the server's TimeZone: timestamps then arrive with
    # Python's own UTC tzinfo and need no conversion (app.db.base.UTCDateTime; a zone
    # such as Etc/UTC cost ~5 us a value: 16 ms on a page of 1000 runs).
    options = ["-c timezone=UTC"]
    if settings.db_statement_timeout_ms:  # a runaway query cannot hold a worker forever
        options.append(f"-c statement_timeout={settings.db_statement_timeout_ms}")
    connect_args["options"] = " ".join(options)
    if not settings.db_prepared_statements:
        connect_args["prepare_threshold"] = None  # PgBouncer in transaction mode < 1.21
    kwargs: dict[str, Any] = {
        "pool_size": settings.db_pool_size,
        "max_overflow": settings.db_max_overflow,
        # No pre-ping: it cost a round trip per unit of work. A connection that died with
        # the database fails one request (503, Retry-After) and SQLAlchemy then
        # invalidates the whole pool, so the service recovers on its own.
        "pool_pre_ping": False,
        "pool_recycle": 1800,
        "pool_timeout": 10,
        "connect_args": connect_args,
    }
    kwargs.update(overrides)
    engine = create_engine(url, **kwargs)

    @event.listens_for(engine, "connect")
    def _json_from_rust(dbapi_connection: Any, _record: Any) -> None:
        # json and jsonb columns (run tags above all) parsed by pydantic-core: the
        # standard library's json.loads was a sixth of reading a page of 1000 runs.
        set_json_loads(from_json, dbapi_connection)

    return engine


def make_database(settings: Settings) -> Database:
    """The primary engine, plus a read replica's when CADENCE_READ_DATABASE_URL is set."""
    engine = make_engine(settings)
    replica = (
        make_engine(settings, settings.read_database_url) if settings.read_database_url else None
    )
    return Database(engine, read_engine=replica, status_thresholds=settings.status_thresholds)


def _sqlite_engine(settings: Settings, url_text: str, **overrides: Any) -> Engine:
    url = make_url(url_text)
    if url.database and url.database != ":memory:":
        Path(url.database).parent.mkdir(parents=True, exist_ok=True)
    kwargs: dict[str, Any] = {
        "connect_args": {"timeout": 30, "check_same_thread": False},
        "pool_size": settings.db_pool_size,
        "max_overflow": settings.db_max_overflow,
        "pool_timeout": 30,
    }
    kwargs.update(overrides)
    engine = create_engine(url_text, **kwargs)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Take transaction control from pysqlite so BEGIN is ours (see _on_begin).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        # Writers take the write lock up front: a deferred transaction that reads
        # and then writes can fail with "database is locked" instead of waiting.
        immediate = conn.get_execution_options().get("cadence_write", False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine


# Reads and writes are distinct types: a function that writes takes a ``WriteSession``,
# which only ``Database.write`` hands out, so mypy refuses a
# ``ReadSession`` (perhaps a replica's) or a bare ``Session`` where a write is needed.
# A function that only reads takes ``Session``, which both are. NewTypes cost nothing at
# run time: the session is the sessionmaker's own.
ReadSession = NewType("ReadSession", Session)
WriteSession = NewType("WriteSession", Session)


@contextmanager
def _unit_of_work(session: Session) -> Iterator[Session]:
    """Commit on success, roll back on error, always close.

    Endpoints open their unit of work inside their own body, so a transaction begins
    and ends within one worker thread. Holding a lock (SQLite's write lock, a
    PostgreSQL row lock) across FastAPI's thread hops lets requests that wait for that
    lock take every worker thread, and the holder can never commit (160 racing retries
    did exactly that; the concurrency test caught it). See ARCHITECTURE.md.
    """
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


def _cursor(connection: Connection) -> Any:
    return connection.connection.driver_connection.cursor()  # type: ignore[union-attr]


def status_thresholds_of(session: Session) -> StatusThresholds:
    """The thresholds of the Database that made ``session`` (the defaults for a session
    made some other way)."""
    found = session.info.get(THRESHOLDS)
    return found if isinstance(found, StatusThresholds) else StatusThresholds()


class Database:
    """The engine plus two session factories: reads, and writes (which lock early on SQLite).

    ``bind`` lets tests run every request inside one outer transaction on one
    connection (sessions then use savepoints and the test rolls everything back).
    """

    def __init__(
        self,
        engine: Engine,
        bind: Connection | None = None,
        read_engine: Engine | None = None,
        status_thresholds: StatusThresholds | None = None,
    ) -> None:
        self.engine = engine
        self.read_engine = read_engine
        # What this process keeps between requests for this database (app/db/kept.py).
        self.kept = KeptStore()
        # Tests: every session shares one connection, which no second thread may use.
        self.single_connection = bind is not None
        self._bind = bind
        # The budget words' thresholds (CADENCE_STATUS_*): every status is computed in
        # app/analytics/month.py, which reads them from its session (status_thresholds_of).
        self.status_thresholds = status_thresholds or StatusThresholds()
        # Sessions carry the kept maps and thresholds in their info (a read service has a
        # session, not the Database): ``app.db.kept.KeptMap``.
        info = {STORE: self.kept, THRESHOLDS: self.status_thresholds}
        extra: dict[str, Any] = {"expire_on_commit": False, "info": info}
        if bind is not None:
            self.read_sessions = sessionmaker(
                bind=bind, join_transaction_mode="create_savepoint", **extra
            )
            self.write_sessions = self.primary_reads = self.read_sessions
            return
        # Read-only units of work (dashboards, analytics) may go to a replica; what they
        # read cannot change under them by their own hand (``memo.per_read_session``).
        self.read_sessions = sessionmaker(read_engine or engine, **extra)
        self.primary_reads = sessionmaker(engine, **extra)
        self.write_sessions = sessionmaker(engine.execution_options(**WRITE), **extra)

    @property
    def is_sqlite(self) -> bool:
        return self.engine.dialect.name == "sqlite"

    @contextmanager
    def read(self) -> Iterator[ReadSession]:
        """A unit of work that only reads, and may read from the replica."""
        with _unit_of_work(self.read_sessions(info=READER)) as session:
            yield ReadSession(session)

    @contextmanager
    def read_latest(self) -> Iterator[ReadSession]:
        """A unit of work that only reads, on the primary: it sees the latest commit
        (token checks, a just-written alert state)."""
        with _unit_of_work(self.primary_reads(info=READER)) as session:
            yield ReadSession(session)

    @contextmanager
    def write(self) -> Iterator[WriteSession]:
        """A unit of work that writes, on the primary (SQLite: ``BEGIN IMMEDIATE``)."""
        with _unit_of_work(self.write_sessions()) as session:
            yield WriteSession(session)

    @contextmanager
    def one_statement(self) -> Iterator[Any]:
        """A psycopg cursor on the primary for a write that is one statement, which
        commits on its own (autocommit): no BEGIN and COMMIT round trips, and no session.

        PostgreSQL runs a statement, data-modifying CTEs included, atomically: use this
        only where the whole write is that one statement (the single-run insert; see
        ``app.runs.flows.record_run``). Driver errors reach the caller as SQLAlchemy's,
        as from a session, so they answer as any other database error (503 when the
        connection is lost: it is dropped, with the rest of the pool). Tests (``bind``)
        get a savepoint of their shared transaction.
        """
        if self._bind is not None:
            bound = self._bind
            with bound.begin_nested(), self._translated(bound), _cursor(bound) as cursor:
                yield cursor
            return
        # Connected through SQLAlchemy, so that a refused connection raises as from a
        # session; the statement itself runs on the driver's cursor.
        with self.engine.connect() as connection:
            driver: Any = connection.connection.driver_connection
            try:
                with self._translated(connection):
                    driver.autocommit = True
                    with _cursor(connection) as cursor:
                        yield cursor
            finally:
                if not connection.invalidated and not driver.closed:
                    driver.autocommit = False

    @contextmanager
    def _translated(self, connection: Connection) -> Iterator[None]:
        """Driver errors as SQLAlchemy raises them; a lost connection invalidates the pool
        (as SQLAlchemy does for its own statements)."""
        dbapi_error = self.engine.dialect.loaded_dbapi.Error
        try:
            yield
        except dbapi_error as exc:
            driver = connection.connection.driver_connection
            lost = self.engine.dialect.is_disconnect(exc, driver, None)
            if lost:
                connection.invalidate(exc)
                self.engine.dispose()
            raise DBAPIError.instance(
                None, None, exc, dbapi_error, connection_invalidated=lost
            ) from exc

    def dispose(self) -> None:
        self.engine.dispose()
        if self.read_engine is not None:
            self.read_engine.dispose()
