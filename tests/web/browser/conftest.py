"""Fixtures for the real-browser tests: one live server, one Chromium, a page per test.

The server is a real uvicorn in a background thread, on a free port of 127.0.0.1, with
its own temporary SQLite database (migrated with Alembic, demo data loaded, plus the
``xss-pipe`` and ``empty-pipe`` pipelines posted through the HTTP API). It never touches
the session test database of ``tests/conftest.py``, so these tests run in the SQLite
pass only (``-m "not browser"`` in the PostgreSQL pass).

Chromium is Debian's ``/usr/bin/chromium`` (Playwright cannot download browsers here).
Without it the tests skip loudly, or fail when ``CADENCE_REQUIRE_BROWSER=1`` (CI).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from alembic import command

from app.auth.service import create_token
from app.db.engine import Database, make_engine
from app.db.revision import alembic_config
from app.demo import load_demo
from app.main import create_app
from app.settings import Settings
from tests.fixtures.browser import (
    EMPTY_PIPELINE,
    XSS_DISPLAY_NAME,
    XSS_PIPELINE,
    XSS_TAG,
    XSS_VARIANT,
)
from tests.fixtures.serving import serve_in_thread

CHROMIUM = Path(os.environ.get("CADENCE_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
VIEWPORT = {"width": 1400, "height": 900}
ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"


@dataclass
class LiveServer:
    base_url: str
    database_url: str
    admin_token: str
    ingest_token: str

    def url(self, path: str) -> str:
        return self.base_url + path

    def api(self) -> httpx.Client:
        return httpx.Client(base_url=self.base_url, timeout=30)


@dataclass
class PageProblems:
    """What went wrong while a page was open: console errors, page errors, bad requests."""

    base_url: str
    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    failed_requests: list[str] = field(default_factory=list)
    bad_responses: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)

    def foreign_requests(self) -> list[str]:
        return [u for u in self.requests if not u.startswith(self.base_url + "/")]

    def assert_clean(self) -> None:
        problems = {
            "console errors": self.console_errors,
            "page errors": self.page_errors,
            "failed requests": self.failed_requests,
            "responses >= 400": self.bad_responses,
            "requests to other hosts": self.foreign_requests(),
            "dialogs": self.dialogs,
        }
        found = {k: v for k, v in problems.items() if v}
        assert not found, f"problems while the page was open: {found}"


def _run(
    pipeline: str, run_id: str, variant: str, start: datetime, util: float, tags: dict[str, str]
) -> dict[str, Any]:
    return {
        "pipeline": pipeline,
        "run_id": run_id,
        "variant": variant,
        "started_at": start.isoformat(),
        "finished_at": (start + timedelta(hours=6)).isoformat(),
        "workers": 4,
        "gpu_type": "A100",
        "gpu_utilization": round(util, 4),
        "quality_metric": "auc",
        "quality_value": round(0.8 + util / 10, 4),
        "data_stall_hours": 1.0,
        "checkpoint_hours": 0.25,
        "scheduling_wait_hours": 0.1,
        "tags": tags,
    }


def _seed_over_http(server: LiveServer) -> None:
    """The hostile and the empty pipeline, created the way a user would: through the API."""
    admin = {"Authorization": f"Bearer {server.admin_token}"}
    ingest = {"Authorization": f"Bearer {server.ingest_token}"}
    with server.api() as client:
        for name, body in (
            (
                XSS_PIPELINE,
                {
                    "display_name": XSS_DISPLAY_NAME,
                    "owner": XSS_TAG,
                    "monthly_budget_usd": 500.0,
                    "quality_metric": "auc",
                },
            ),
            (EMPTY_PIPELINE, {"display_name": "Empty pipeline", "monthly_budget_usd": 100.0}),
        ):
            r = client.put(f"/api/v1/pipelines/{name}", json=body, headers=admin)
            assert r.status_code == 200, r.text
        now = datetime.now(UTC).replace(microsecond=0)
        runs = []
        tags = {"note": XSS_TAG, XSS_TAG: "key"}
        # No "baseline": the hostile variant has the most runs, so it is the default
        # variant and its name reaches the headline, the levers and the what-if fragment.
        for n in range(5):
            start = now - timedelta(days=3 * n + 1)
            util = 0.4 + n / 100
            runs.append(_run(XSS_PIPELINE, f"{XSS_VARIANT}-{n}", XSS_VARIANT, start, util, tags))
            if n < 4:
                later = start + timedelta(hours=8)
                runs.append(_run(XSS_PIPELINE, f"cand-{n}", "candidate", later, util + 0.2, tags))
        r = client.post("/api/v1/runs/batch", json={"runs": runs}, headers=ingest)
        assert r.status_code == 201, r.text


@pytest.fixture(scope="package")
def live_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    url = f"sqlite:///{tmp_path_factory.mktemp('browser-db') / 'cadence-browser.db'}"
    command.upgrade(alembic_config(url), "head")
    settings = Settings(database_url=url, log_level="warning")
    db = Database(make_engine(settings))
    try:
        with db.write() as session:
            load_demo(session)
            _, admin = create_token(session, "browser-admin", "admin")
            _, ingest = create_token(session, "browser-ingest", "ingest")
    finally:
        db.dispose()

    with serve_in_thread(create_app(settings)) as base:
        live = LiveServer(base, url, admin, ingest)
        _seed_over_http(live)
        yield live


def _no_browser(reason: str) -> None:
    message = f"BROWSER TESTS NOT RUN: {reason}"
    if os.environ.get("CADENCE_REQUIRE_BROWSER") == "1":
        pytest.fail(message + " (CADENCE_REQUIRE_BROWSER=1)", pytrace=False)
    pytest.skip(message + " (set CADENCE_REQUIRE_BROWSER=1 to make this a failure)")


@pytest.fixture(scope="package")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One Chromium for this package's tests, as a persistent context (a BrowserContext).

    Package scope, not session: Playwright's sync API keeps an asyncio loop running in
    the main thread until it is stopped, and later tests that call ``asyncio.run()``
    (tests/system/test_concurrency.py) would fail with "cannot be called from a running event
    loop" if it outlived the browser tests.

    Persistent, so Chromium keeps its disk and V8 code caches: after two loads the 4.8 MB
    plotly.min.js is no longer compiled on every page, which makes a pipeline page load
    about three times faster (~1 s instead of ~3 s on two cores). The app keeps no
    cookies or storage, so sharing the context costs the tests no isolation; each test
    still gets its own page.
    """
    if not CHROMIUM.exists():
        _no_browser(f"{CHROMIUM} does not exist (apt-get install chromium)")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        _no_browser(f"the playwright package is not installed: {exc}")
    pw = sync_playwright().start()
    try:
        context = pw.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")),
            executable_path=str(CHROMIUM),
            args=CHROMIUM_ARGS,
            viewport=VIEWPORT,
            accept_downloads=True,
        )
    except Exception as exc:
        pw.stop()
        _no_browser(f"Chromium at {CHROMIUM} did not launch: {str(exc).splitlines()[0]}")
    context.set_default_timeout(15_000)
    try:
        yield context
    finally:
        context.close()
        pw.stop()


@pytest.fixture(scope="session")
def artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS


def watch(page: Any, base_url: str) -> PageProblems:
    problems = PageProblems(base_url)

    def on_console(msg: Any) -> None:
        if msg.type == "error":
            problems.console_errors.append(f"{msg.text} ({msg.location.get('url', '')})")

    def on_failed(request: Any) -> None:
        failure = request.failure
        # A download the test reads through Playwright, or a fetch the page aborted on
        # purpose (the what-if form cancels a superseded update), is not a failure.
        if failure == "net::ERR_ABORTED" and (
            urlsplit(request.url).path.endswith(".csv") or "/whatif?" in request.url
        ):
            return
        problems.failed_requests.append(f"{request.method} {request.url}: {failure}")

    def on_response(response: Any) -> None:
        if response.status >= 400:
            problems.bad_responses.append(f"{response.status} {response.url}")

    def on_dialog(dialog: Any) -> None:
        problems.dialogs.append(f"{dialog.type}: {dialog.message}")
        dialog.dismiss()

    page.on("console", on_console)
    page.on("pageerror", lambda exc: problems.page_errors.append(str(exc)))
    page.on("requestfailed", on_failed)
    page.on("response", on_response)
    page.on("request", lambda request: problems.requests.append(request.url))
    page.on("dialog", on_dialog)
    return problems


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A new tab at 1400 x 900, closed after the test."""
    page = browser.new_page()
    try:
        yield page
    finally:
        page.close()


@pytest.fixture
def problems(page: Any, live_server: LiveServer) -> PageProblems:
    """What goes wrong on ``page`` (console, page errors, requests, dialogs) from now on."""
    return watch(page, live_server.base_url)
