"""Every page loads cleanly in a real browser, from this server only, and is screenshotted."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from app.assets import asset_url
from tests.fixtures.browser import FRAUD, RANKER, chart_state, money, wait_for_charts

pytestmark = pytest.mark.browser

PAGES = [
    ("/", "overview", "Pipelines"),
    (f"/pipelines/{RANKER}", "pipeline", "Recommendations ranker"),
    (f"/pipelines/{FRAUD}", "pipeline-fraud", "Fraud detector"),
    ("/review", "review", "Weekly goodput review"),
    ("/help", "help", "How Cadence computes its numbers"),
]


@pytest.mark.parametrize(("path", "shot", "heading"), PAGES, ids=[p[1] for p in PAGES])
def test_page_loads_cleanly_from_this_server_only(
    page, problems, live_server, artifacts, path, shot, heading
):
    response = page.goto(live_server.url(path))
    assert response is not None and response.status == 200
    assert response.headers["content-type"].startswith("text/html")
    expect(page.locator("h1")).to_contain_text(heading)
    expect(page.get_by_role("navigation", name="Main")).to_be_visible()
    wait_for_charts(page)  # a page with charts has drawn all of them
    page.wait_for_load_state("networkidle")
    page.screenshot(path=str(artifacts / f"{shot}.png"), full_page=True)

    assert problems.requests[0] == live_server.url(path)
    assert all(u.startswith(live_server.base_url + "/") for u in problems.requests), (
        problems.foreign_requests()
    )
    if path == "/":
        # The portfolio's sparklines are SVG in the page: no chart library, no script.
        assert not [u for u in problems.requests if "/static/" in u and u.endswith(".js")]
        assert not [u for u in problems.requests if ".js?" in u], problems.requests
    elif path.startswith("/pipelines/"):
        # Plotly comes from this server, never from a CDN.
        assert live_server.url(asset_url("vendor/plotly-basic.min.js")) in problems.requests
        assert page.evaluate("typeof Plotly") == "object"
    problems.assert_clean()


def test_overview_cards_show_each_pipeline_with_spend_and_gate(page, problems, live_server):
    page.goto(live_server.url("/"))
    wait_for_charts(page)
    ranker = page.locator(f"article.card[data-pipeline={RANKER}]")
    expect(ranker.get_by_role("link", name="Recommendations ranker")).to_have_attribute(
        "href", f"/pipelines/{RANKER}"
    )
    expect(ranker.locator(".spend")).to_contain_text("of $1,400")
    # The card's verdict is the gate's, as the API gives it (the demo's candidate has few
    # runs: with the spread they cannot show borrowed, its p90 bill may pass or not).
    with live_server.api() as client:
        gate = client.get(f"/api/v1/pipelines/{RANKER}/gate").json()
    expect(ranker.locator(".verdict")).to_have_text(gate["verdict_label"])
    expect(page.locator(f"article.card[data-pipeline={FRAUD}] .verdict")).to_have_text(
        "no gate yet"
    )
    # Each card with runs shows a sparkline of cost per run, drawn on the server: a line
    # across the card, with its accessible name.
    for name in (RANKER, FRAUD):
        spark = page.locator(f"article.card[data-pipeline={name}] svg.sparkline")
        expect(spark).to_have_attribute("role", "img")
        expect(spark).to_have_attribute("aria-label", re.compile(r"^Cost per \S+ run, last \d+$"))
        box = spark.bounding_box()
        card = page.locator(f"article.card[data-pipeline={name}]").bounding_box()
        assert box and card and box["width"] > card["width"] * 0.7 and box["height"] == 40
        assert spark.locator("polyline").count() >= 1
    problems.assert_clean()


def test_overview_spend_matches_the_pipeline_page_today(page, problems, live_server):
    """The overview's spend per month is the pipeline page's "today" figure.

    (The card used to take the 12 newest runs of every variant and keep the baseline
    ones, 3 on the demo data: $1,245 on the overview against $1,228 on the page.)
    """
    page.goto(live_server.url("/"))
    overview = money(page.locator(f"article.card[data-pipeline={RANKER}] .spend").inner_text())
    page.goto(live_server.url(f"/pipelines/{RANKER}"))
    today_text = page.locator(".big-number[data-variant=baseline]").get_by_text(
        re.compile(r"% vs today \(")
    )
    today = money(today_text.inner_text())
    assert overview == today
    problems.assert_clean()


def test_review_week_navigation(page, problems, live_server):
    page.goto(live_server.url("/review"))
    heading = page.locator("h1").inner_text()
    week = heading.rsplit(" ", 1)[-1]
    expect(page.locator(f"tr[data-pipeline={RANKER}] th a")).to_have_text("Recommendations ranker")
    page.get_by_role("link", name=re.compile(r"^← \d{4}-W\d{2}$")).click()
    expect(page.locator("h1")).not_to_have_text(heading)
    assert "week=" in page.url
    previous = page.locator("h1").inner_text().rsplit(" ", 1)[-1]
    assert previous < week  # ISO week labels of one year sort as text
    problems.assert_clean()


def test_unknown_pipeline_shows_a_readable_404_page(page, live_server):
    response = page.goto(live_server.url("/pipelines/no-such-pipeline"))
    assert response is not None and response.status == 404
    expect(page.locator("main")).to_contain_text("no-such-pipeline")


def test_pipeline_page_at_phone_width(page, problems, live_server, artifacts):
    """At 390 px the charts and controls fit the screen (wide tables may scroll)."""
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(live_server.url(f"/pipelines/{RANKER}"))
    wait_for_charts(page)
    page.screenshot(path=str(artifacts / "pipeline-mobile.png"), full_page=True)
    for chart in chart_state(page):
        if chart["visible"]:
            assert 0 < chart["width"] <= 390, chart
    overflowing = page.evaluate(
        """() => Array.from(document.querySelectorAll('main *'))
             .filter(e => !e.closest('table') && e.getBoundingClientRect().right > 391)
             .map(e => e.tagName + '.' + e.className)"""
    )
    assert overflowing == []
    problems.assert_clean()


def test_review_fits_a_phone_screen(page, live_server):
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(live_server.url("/review"))
    widths = page.evaluate(
        "[document.documentElement.scrollWidth, document.documentElement.clientWidth]"
    )
    assert widths[0] <= widths[1], f"page is {widths[0]} px wide on a {widths[1]} px screen"


def test_api_docs_work_offline(page, problems, live_server, artifacts):
    """/docs runs Swagger UI from this server (a package's files), not from a CDN."""
    response = page.goto(live_server.url("/docs"))
    assert response is not None and response.status == 200
    expect(page.locator(".opblock-summary-path", has_text="/api/v1/runs/batch")).to_be_visible(
        timeout=15_000
    )
    # The bearer scheme in openapi.json gives Swagger UI its Authorize button.
    expect(page.locator("button.authorize")).to_be_visible()
    page.screenshot(path=str(artifacts / "docs.png"))
    assert live_server.url(asset_url("vendor/swagger-ui-bundle.js")) in problems.requests
    assert all(u.startswith(live_server.base_url + "/") for u in problems.requests), (
        problems.foreign_requests()
    )
    problems.assert_clean()
