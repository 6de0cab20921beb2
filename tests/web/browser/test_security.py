"""The Content-Security-Policy in a real browser: every page works under it, with no
violation; and sign-in through the real form when reading needs a token."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from alembic import command
from playwright.sync_api import expect

from app.auth.service import create_token
from app.db.engine import Database, make_engine
from app.db.revision import alembic_config
from app.demo import load_demo
from app.main import create_app
from app.security.headers import CONTENT_SECURITY_POLICY
from app.settings import Settings
from tests.fixtures.browser import (
    FRAUD,
    RANKER,
    XSS_PIPELINE,
    chart_state,
    wait_for_charts,
)
from tests.fixtures.serving import serve_in_thread
from tests.web.browser.conftest import watch

pytestmark = pytest.mark.browser

# Collected before any page script runs, in every frame: violations the page saw.
CSP_LISTENER = """
window.__csp = [];
document.addEventListener('securitypolicyviolation', (e) => {
  window.__csp.push({directive: e.violatedDirective, blocked: e.blockedURI,
                     source: e.sourceFile, line: e.lineNumber, sample: e.sample});
}, true);
"""

PAGES = {
    "overview": "/",
    "pipeline": f"/pipelines/{RANKER}",
    "pipeline-fraud": f"/pipelines/{FRAUD}",
    "pipeline-hostile": f"/pipelines/{XSS_PIPELINE}",
    "review": "/review",
    "help": "/help",
    "docs": "/docs",
}


def csp_console_errors(problems: Any) -> list[str]:
    return [m for m in problems.console_errors if "Content Security Policy" in m]


def csp_violations(page: Any) -> list[dict[str, Any]]:
    return page.evaluate("window.__csp")  # type: ignore[no-any-return]


def settle(page: Any) -> None:
    """Let late work (Plotly's resize, Swagger's rendering) report any violation."""
    page.wait_for_load_state("networkidle")
    page.wait_for_timeout(150)


@pytest.fixture
def csp_page(page: Any) -> Any:
    page.add_init_script(CSP_LISTENER)
    return page


@pytest.mark.parametrize("path", PAGES.values(), ids=PAGES.keys())
def test_every_page_works_under_the_policy(csp_page, problems, live_server, path):
    page = csp_page
    response = page.goto(live_server.url(path))
    assert response is not None and response.status == 200
    headers = response.headers
    assert headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    assert headers["x-frame-options"] == "DENY"
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["cache-control"] == "no-store"
    if path == "/docs":
        expect(page.locator(".opblock-summary-path", has_text="/api/v1/runs/batch")).to_be_visible()
    else:
        expect(page.locator("h1")).to_be_visible()
        wait_for_charts(page)
        charts = chart_state(page)
        if path.startswith("/pipelines/"):  # review and help have none
            assert charts, "no charts on the page"
        if path == "/":  # the sparklines are inline SVG, drawn on the server
            assert page.locator("svg.sparkline").count() >= 2
        # Every chart was drawn: Plotly's inline styles and generated <style> are allowed.
        assert all(c["svg"] and c["plotted"] == c["embedded"] for c in charts), charts
    settle(page)
    assert csp_violations(page) == []
    assert csp_console_errors(problems) == []
    problems.assert_clean()


def test_the_what_if_update_works_under_the_policy(csp_page, problems, live_server):
    """The fetched fragment (innerHTML + Plotly.react) breaks no rule either."""
    page = csp_page
    page.goto(live_server.url(f"/pipelines/{RANKER}"))
    wait_for_charts(page)
    with page.expect_response(lambda r: "/whatif?" in r.url and r.status == 200):
        page.locator("#ut").fill("0.7")
    expect(page.locator("#whatif-status")).to_have_text("Updated")
    wait_for_charts(page)
    settle(page)
    assert csp_violations(page) == []
    assert csp_console_errors(problems) == []
    problems.assert_clean()


def test_the_policy_is_enforced_and_violations_are_seen(csp_page, live_server):
    """The listener is not blind: an injected inline script is blocked and reported."""
    page = csp_page
    page.goto(live_server.url("/help"))
    page.evaluate(
        """() => { const s = document.createElement('script');
                   s.textContent = 'window.__ran = true'; document.body.appendChild(s); }"""
    )
    page.wait_for_function("window.__csp.length > 0")
    assert page.evaluate("window.__ran") is None
    assert {v["directive"] for v in csp_violations(page)} <= {"script-src", "script-src-elem"}
    # No framing, by header.
    response = page.request.get(live_server.url("/"))
    assert response.headers["x-frame-options"] == "DENY"
    assert "frame-ancestors 'none'" in response.headers["content-security-policy"]


# --- sign-in in token mode ----------------------------------------------------------


@dataclass
class TokenServer:
    base_url: str
    read_token: str
    ingest_token: str
    admin_token: str

    def url(self, path: str) -> str:
        return self.base_url + path


@pytest.fixture(scope="module")
def token_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TokenServer]:
    """A second live server, ``CADENCE_READ_ACCESS=token``, on its own SQLite file."""
    url = f"sqlite:///{tmp_path_factory.mktemp('token-db') / 'cadence-token.db'}"
    command.upgrade(alembic_config(url), "head")
    settings = Settings(
        database_url=url, read_access="token", secret_key="s" * 32, log_level="warning"
    )
    db = Database(make_engine(settings))
    try:
        with db.write() as session:
            load_demo(session)
            _, read = create_token(session, "browser-reader", "read")
            _, ingest = create_token(session, "browser-ingest-only", "ingest")
            _, admin = create_token(session, "browser-admin", "admin")
    finally:
        db.dispose()
    with serve_in_thread(create_app(settings), "token-mode server") as base:
        yield TokenServer(base, read, ingest, admin)


@pytest.fixture
def fresh_cookies(browser: Any) -> Iterator[None]:
    """The package shares one browser context: start and leave it without cookies
    (cookies are per host, not per port, so they would reach the open-mode server)."""
    browser.clear_cookies()
    yield
    browser.clear_cookies()


def test_sign_in_through_the_form_then_the_dashboard_loads(csp_page, token_server, fresh_cookies):
    page = csp_page
    problems = watch(page, token_server.base_url)
    target = f"/pipelines/{RANKER}?cadence=2"

    # Not signed in: the page sends the browser to the sign-in form, keeping the target.
    response = page.goto(token_server.url(target))
    assert response is not None and response.status == 200
    assert page.url.startswith(token_server.url("/login?next="))
    assert response.headers["content-security-policy"] == CONTENT_SECURITY_POLICY
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    token_input = page.get_by_label("API token")
    expect(token_input).to_have_attribute("type", "password")

    # A token without the read scope is refused, on the form, with a reason.
    token_input.fill(token_server.ingest_token)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_contain_text("has no read access")
    assert page.url.startswith(token_server.url("/login"))

    # A read token signs in and lands on the page asked for, charts drawn.
    page.get_by_label("API token").fill(token_server.read_token)
    with page.expect_navigation():
        page.get_by_role("button", name="Sign in").click()
    assert page.url == token_server.url(target)
    expect(page.locator("h1")).to_contain_text("Recommendations ranker")
    wait_for_charts(page)
    assert len(chart_state(page)) >= 3
    expect(page.locator("header .account")).to_contain_text("Signed in as browser-reader")
    # The session cookie is out of the page's reach; the what-if fetch still carries it.
    assert "cadence_session" not in page.evaluate("document.cookie")
    with page.expect_response(lambda r: "/whatif?" in r.url and r.status == 200):
        page.locator("#ut").fill("0.6")
    expect(page.locator("#whatif-status")).to_have_text("Updated")

    # Signing out ends it: back to the form, and pages ask for sign-in again.
    with page.expect_navigation():
        page.get_by_role("button", name="Sign out").click()
    assert page.url == token_server.url("/login")
    page.goto(token_server.url("/review"))
    assert page.url == token_server.url("/login?next=%2Freview")

    settle(page)
    assert csp_violations(page) == []
    assert csp_console_errors(problems) == []
    assert not problems.page_errors and not problems.foreign_requests()


def test_an_admin_changes_the_budget_in_the_form_and_sees_the_change(
    page, token_server, fresh_cookies
):
    page.goto(token_server.url(f"/pipelines/{RANKER}/settings"))
    page.get_by_label("API token").fill(token_server.admin_token)
    with page.expect_navigation():
        page.get_by_role("button", name="Sign in").click()
    budget = page.get_by_label("Monthly budget (USD)")
    before = budget.input_value()
    # A wrong value: a message under the field, nothing saved.
    page.get_by_label("Current cadence (runs per week)").fill("0")
    with page.expect_navigation():
        page.get_by_role("button", name="Save settings").click()
    expect(page.locator("#e-runs_per_week")).to_contain_text("must be at least 0.01")
    expect(page.get_by_role("alert")).to_contain_text("Nothing was saved")
    page.get_by_label("Current cadence (runs per week)").fill("1")
    budget.fill("1750")
    with page.expect_navigation():
        page.get_by_role("button", name="Save settings").click()
    expect(page.locator("[data-saved]")).to_contain_text("1 setting changed")
    page.goto(token_server.url(f"/pipelines/{RANKER}"))
    row = page.locator("#changes tr[data-change=monthly_budget_usd]").first
    expect(row).to_contain_text("browser-admin")
    expect(row).to_contain_text(before)
    expect(row).to_contain_text("1750")
