"""Light and usable everywhere: transfer size, phone width, accessibility (axe-core)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.fixtures.axe import axe_violations
from tests.fixtures.browser import EMPTY_PIPELINE, FRAUD, RANKER, wait_for_charts

pytestmark = pytest.mark.browser

PAGES = [
    "/",
    f"/pipelines/{RANKER}/settings",
    f"/pipelines/{RANKER}",
    f"/pipelines/{FRAUD}",
    f"/pipelines/{EMPTY_PIPELINE}",
    "/review",
    "/help",
    "/login",
]
PHONE = {"width": 390, "height": 844}


def transferred_bytes(page: Any, url: str) -> tuple[int, dict[str, int]]:
    """Bytes on the wire (headers + compressed bodies) for a load of ``url`` with the
    browser cache disabled: what a first visit costs. From the DevTools protocol's
    ``encodedDataLength``, which counts what the network delivered."""
    cdp = page.context.new_cdp_session(page)
    cdp.send("Network.enable")
    cdp.send("Network.setCacheDisabled", {"cacheDisabled": True})
    urls: dict[str, str] = {}
    sizes: dict[str, int] = {}
    cdp.on(
        "Network.requestWillBeSent", lambda e: urls.__setitem__(e["requestId"], e["request"]["url"])
    )
    cdp.on(
        "Network.loadingFinished",
        lambda e: sizes.__setitem__(
            urls.get(e["requestId"], e["requestId"]), int(e["encodedDataLength"])
        ),
    )
    page.goto(url)
    wait_for_charts(page)
    page.wait_for_load_state("networkidle")
    cdp.detach()
    return sum(sizes.values()), sizes


def test_a_cold_pipeline_page_transfers_under_1_5_mb(page, problems, live_server):
    total, sizes = transferred_bytes(page, live_server.url(f"/pipelines/{RANKER}"))
    assert any("plotly-basic.min.js" in u for u in sizes), sizes  # the charts' library came
    assert 0 < total < 1_500_000, sizes
    problems.assert_clean()


def test_a_cold_portfolio_transfers_under_100_kb(page, problems, live_server):
    total, sizes = transferred_bytes(page, live_server.url("/"))
    # Sparklines are SVG in the page: no chart library, no script at all.
    assert not [u for u in sizes if ".js" in u], sizes
    assert 0 < total < 100_000, sizes
    problems.assert_clean()


@pytest.mark.parametrize("path", PAGES)
def test_no_wcag_violation(page, problems, live_server, path):
    page.goto(live_server.url(path))
    wait_for_charts(page)
    violations = axe_violations(page)
    assert violations == [], violations
    problems.assert_clean()


@pytest.mark.parametrize("path", PAGES)
def test_no_sideways_scroll_on_a_phone(page, problems, live_server, path):
    page.set_viewport_size(PHONE)
    page.goto(live_server.url(path))
    wait_for_charts(page)
    widths = page.evaluate(
        "() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]"
    )
    assert widths[0] <= widths[1], (path, widths)
    problems.assert_clean()


def test_on_a_phone_tables_stack_and_toolbars_leave_titles_alone(page, problems, live_server):
    page.set_viewport_size(PHONE)
    page.goto(live_server.url(f"/pipelines/{RANKER}"))
    wait_for_charts(page)
    # Every runs-table row is a block: its run id and its cost are both on screen,
    # each beside its column's name.
    row = page.locator("table.runs-table tbody tr").first
    cells = row.locator("td, th")
    assert cells.count() >= 5
    for i in range(cells.count()):
        box = cells.nth(i).bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"], i
    labels = [cells.nth(i).get_attribute("data-label") for i in range(cells.count())]
    assert labels[0] == "Run" and all(labels), labels
    assert (
        page.evaluate(
            "() => getComputedStyle(document.querySelector('table.runs-table tr')).display"
        )
        == "block"
    )
    # No chart toolbar on a phone, so none sits on a chart's title.
    assert page.locator(".chart .modebar-btn").count() == 0
    assert page.locator(".chart .gtitle").count() > 0
    problems.assert_clean()


def test_on_a_desktop_the_toolbar_shows_on_hover_only(page, problems, live_server):
    page.goto(live_server.url(f"/pipelines/{RANKER}"))
    wait_for_charts(page)
    # Plotly's hover-only toolbar: present, and drawn only while the pointer is on it.
    assert page.locator("#chart-cost .modebar--hover").count() == 1
    assert page.locator("#chart-cost .modebar-btn").count() > 0
    assert (
        page.evaluate(
            "() => getComputedStyle(document.querySelector('table.runs-table tr')).display"
        )
        == "table-row"
    )
    problems.assert_clean()
