"""The alert sender: drains the outbox outside the request path.

Each process that serves requests runs one ``Sender`` thread (started in the app's
lifespan, ``CADENCE_ALERT_SENDER``). It claims due notifications, at most
``CADENCE_ALERT_MAX_IN_FLIGHT`` at a time, and POSTs them from a small thread pool: a
receiver slower than the timeout holds one of those threads, never a request's. An
evaluation in this process wakes it at once; rows queued by other processes, and
retries coming due, are found by polling every ``POLL_SECONDS``.

``drain`` is the same work done once, in the caller's thread, with an injectable clock
(the tests use it).
"""

from __future__ import annotations

import logging
import secrets
import threading
from concurrent.futures import Future, ThreadPoolExecutor, wait
from datetime import datetime, timedelta

import httpx

from app.alerts import repository, rules
from app.alerts.delivery import attempt
from app.alerts.targets import Resolver, system_resolver
from app.db.base import utcnow
from app.db.engine import Database
from app.settings import Settings

log = logging.getLogger("cadence.alerts")
POLL_SECONDS = 2.0
# Set when an evaluation queued a notification: the sender looks at once.
WAKE = threading.Event()


def lease(settings: Settings) -> timedelta:
    """How long a claim holds: well past one attempt's worst case (connect, write and
    read timeouts in a row), so a live sender never loses its row to another."""
    return timedelta(seconds=max(60.0, 4 * settings.alert_webhook_timeout_seconds))


def claim(
    db: Database, settings: Settings, now: datetime, limit: int, token: str
) -> list[repository.Claimed]:
    """Claim up to ``limit`` due notifications for this sender (committed on return)."""
    with db.read_latest() as session:
        if not repository.any_due(session, now=now):  # the usual case: no write lock
            return []
    with db.write() as session:
        return repository.claim_due(
            session, now=now, limit=limit, lease=lease(settings), token=token
        )


def send(
    db: Database,
    settings: Settings,
    claimed: repository.Claimed,
    token: str,
    *,
    now: datetime | None = None,
    resolve: Resolver = system_resolver,
    transport: httpx.BaseTransport | None = None,
) -> str:
    """One attempt of one claimed notification, then its record; the new status."""
    result = attempt(
        claimed.url,
        rules.with_public_links(claimed.payload, settings.public_url),
        delivery_id=claimed.id,
        timeout_seconds=settings.alert_webhook_timeout_seconds,
        allowed_hosts=settings.webhook_allowed,
        resolve=resolve,
        transport=transport,
    )
    with db.write() as session:
        status = repository.record_attempt(
            session,
            claimed,
            result,
            now=now or utcnow(),
            token=token,
            retry_base=settings.alert_retry_base_seconds,
        )
    level = logging.INFO if status == "delivered" else logging.WARNING
    log.log(level, "alert delivery %s: %s (attempt %s)", claimed.id, status, claimed.attempts + 1)
    return status


def drain(
    db: Database,
    settings: Settings,
    *,
    now: datetime | None = None,
    limit: int = 100,
    resolve: Resolver = system_resolver,
    transport: httpx.BaseTransport | None = None,
) -> dict[int, str]:
    """Send what is due at ``now`` (one attempt each), in this thread: {id: status}."""
    now = now or utcnow()
    token = secrets.token_hex(16)
    return {
        c.id: send(db, settings, c, token, now=now, resolve=resolve, transport=transport)
        for c in claim(db, settings, now, limit, token)
    }


class Sender:
    """The background sender of one process; ``start`` and ``stop`` from the lifespan."""

    def __init__(self, db: Database, settings: Settings) -> None:
        self.db = db
        self.settings = settings
        self.stopping = threading.Event()
        self.pool = ThreadPoolExecutor(
            settings.alert_max_in_flight, thread_name_prefix="cadence-alert-send"
        )
        self.thread = threading.Thread(target=self._run, name="cadence-alert-sender", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        """Stop claiming; wait (bounded by the webhook timeout) for sends in flight. A
        send cut short is sent again when its claim expires."""
        self.stopping.set()
        WAKE.set()
        self.thread.join(timeout=self.settings.alert_webhook_timeout_seconds + 5)
        self.pool.shutdown(wait=False, cancel_futures=True)

    def _run(self) -> None:
        running: set[Future[str]] = set()
        token = secrets.token_hex(16)
        while not self.stopping.is_set():
            WAKE.clear()  # before claiming: a wake-up during the claim is not lost
            running = {f for f in running if not f.done()}
            free = self.settings.alert_max_in_flight - len(running)
            try:
                claimed = claim(self.db, self.settings, utcnow(), free, token) if free else []
            except Exception as exc:  # the database is away: try again at the next poll
                first_line = (str(exc).splitlines() or [type(exc).__name__])[0][:200]
                log.warning("alert sender could not claim deliveries: %s", first_line)
                claimed = []
            for c in claimed:
                future = self.pool.submit(self._send, c, token)
                future.add_done_callback(lambda _: WAKE.set())
                running.add(future)
            WAKE.wait(POLL_SECONDS)
        wait(running, timeout=self.settings.alert_webhook_timeout_seconds + 1)

    def _send(self, claimed: repository.Claimed, token: str) -> str:
        try:
            return send(self.db, self.settings, claimed, token)
        except Exception:  # its claim expires and it is sent again
            log.exception("alert delivery %s could not be recorded", claimed.id)
            return "error"
