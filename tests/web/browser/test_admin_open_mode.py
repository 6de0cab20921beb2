"""In the default (open) mode reads need nothing, and an admin still changes things in
the browser: signs in from the page, edits a budget, adds an alert rule, signs out.

The pipeline is a throw-away one (``example-job``) so the shared live server's demo
pipelines, which other browser tests read, are left as they were."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.browser

PIPELINE = "example-job"
# A public address literal: the rule is saved (internal hosts are refused) and never
# fires in this test (a goodput drop of 50 points), so nothing is ever sent to it.
WEBHOOK = "https://93.184.215.14/cadence-hook"


@pytest.fixture
def signed_out(browser: Any) -> Iterator[None]:
    """The package shares one browser context: start and leave this test signed out."""
    browser.clear_cookies()
    yield
    browser.clear_cookies()


@pytest.fixture
def example_job(live_server: Any) -> str:
    body = {"price_per_gpu_hour": 2.5, "monthly_budget_usd": 1000, "runs_per_week": 1}
    headers = {"Authorization": f"Bearer {live_server.admin_token}"}
    with live_server.api() as api:
        assert api.put(f"/api/v1/pipelines/{PIPELINE}", json=body, headers=headers).is_success
    return PIPELINE


def test_an_admin_edits_a_budget_and_adds_an_alert_rule_in_open_mode(
    page: Any, live_server: Any, signed_out: None, example_job: str
) -> None:
    # Reading needs no sign-in; the settings are shown, not editable, with a way in.
    page.goto(live_server.url(f"/pipelines/{example_job}/settings"))
    expect(page.get_by_role("button", name="Save settings")).to_have_count(0)
    with page.expect_navigation():
        page.get_by_role("link", name="Admin sign-in").click()
    page.get_by_label("API token").fill(live_server.admin_token)
    with page.expect_navigation():
        page.get_by_role("button", name="Sign in").click()
    assert page.url == live_server.url(f"/pipelines/{example_job}/settings")

    # Signed in: the budget is a field; saving says what changed and the audit shows it.
    page.get_by_label("Monthly budget (USD)").fill("1750")
    with page.expect_navigation():
        page.get_by_role("button", name="Save settings").click()
    expect(page.locator("[data-saved]")).to_contain_text("1 setting changed")
    expect(page.get_by_label("Monthly budget (USD)")).to_have_value("1750")

    # An alert rule from the form, listed as enabled.
    page.goto(live_server.url(f"/pipelines/{example_job}/alerts"))
    page.get_by_label("Alert when").select_option("goodput_drop")
    page.get_by_label("Threshold").fill("50")
    page.get_by_label("Webhook URL").fill(WEBHOOK)
    with page.expect_navigation():
        page.get_by_role("button", name="Add rule").click()
    expect(page.locator("[data-done]")).to_be_visible()
    rule = page.locator("#rules tr[data-rule]")
    expect(rule).to_have_count(1)
    expect(rule).to_have_attribute("data-enabled", "yes")
    expect(rule).to_contain_text("goodput drop")

    # The API agrees, and signing out leaves the page readable but not editable.
    with live_server.api() as api:
        assert api.get(f"/api/v1/pipelines/{example_job}").json()["monthly_budget_usd"] == 1750
    with page.expect_navigation():
        page.get_by_role("button", name="Sign out").click()
    page.goto(live_server.url(f"/pipelines/{example_job}/alerts"))
    expect(page.get_by_role("button", name="Add rule")).to_have_count(0)
    expect(page.locator("#rules tr[data-rule]")).to_have_count(1)
