"""A 390 x 844 phone: the answer first, the what-if form folded under it, table cells that
wrap between words, charts the width of the screen, and no page wider than the screen."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import expect

from tests.fixtures.browser import FRAUD, RANKER, wait_for_charts

pytestmark = pytest.mark.browser

PHONE = {"width": 390, "height": 844}

# For every cell of every data table: its width, and each word's width and how many line
# boxes the word was laid out on (more than one: the word was broken inside).
CELL_WORDS_JS = """
() => {
  const out = [];
  document.querySelectorAll('table.data td, table.data tbody th').forEach((cell) => {
    const cellWidth = cell.getBoundingClientRect().width;
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      // A word: letters, digits and the marks inside a number or an amount ("within",
      // "$1,228", "70%"); a line may break at anything else (spaces, hyphens, slashes).
      const re = /[\\p{L}\\p{N}$.,%@_]+/gu;
      let m;
      while ((m = re.exec(node.data)) !== null) {
        const range = document.createRange();
        range.setStart(node, m.index);
        range.setEnd(node, m.index + m[0].length);
        const rects = Array.from(range.getClientRects()).filter(r => r.width > 0);
        const width = range.getBoundingClientRect().width;
        out.push({word: m[0], lines: rects.length, width, cellWidth,
                  label: cell.getAttribute('data-label') || ''});
      }
    }
  });
  return out;
}
"""


def on_phone(page: Any, url: str) -> None:
    page.set_viewport_size(PHONE)
    page.goto(url)
    wait_for_charts(page)


def test_the_answer_is_the_first_screen_and_the_form_is_folded_under_it(
    page, problems, live_server
):
    on_phone(page, live_server.url(f"/pipelines/{RANKER}"))
    card = page.locator("#decision").bounding_box()
    folded = page.locator("#whatif-details")
    assert card is not None and card["y"] >= 0
    assert card["y"] + card["height"] <= PHONE["height"], card  # all of it, unscrolled
    expect(folded).not_to_have_attribute("open", "")
    box = folded.bounding_box()
    assert box is not None and box["y"] >= card["y"] + card["height"]
    expect(folded.locator("summary")).to_contain_text("Change assumptions")
    expect(page.locator("#whatif-form").get_by_label("Cadence (runs per week)")).to_be_hidden()
    problems.assert_clean()


def test_the_folded_form_opens_from_the_keyboard_and_still_changes_the_answer(
    page, problems, live_server
):
    on_phone(page, live_server.url(f"/pipelines/{RANKER}"))
    sentence = page.get_by_test_id("decision")
    before = sentence.inner_text()
    # Tab from the page's last link before the disclosure lands on its summary.
    page.locator("#decision a").last.focus()
    page.keyboard.press("Tab")
    assert page.evaluate("() => document.activeElement.tagName") == "SUMMARY"
    page.keyboard.press("Enter")
    expect(page.locator("#whatif-details")).to_have_attribute("open", "")
    cadence = page.locator("#whatif-form").get_by_label("Cadence (runs per week)")
    expect(cadence).to_be_visible()
    cadence.fill("5")
    cadence.press("Enter")
    expect(sentence).not_to_have_text(before)
    expect(sentence).to_contain_text("5")
    assert "cadence=5" in page.url
    problems.assert_clean()


def test_on_a_desktop_the_form_is_open_beside_the_answer(page, problems, live_server):
    page.goto(live_server.url(f"/pipelines/{RANKER}"))
    expect(page.locator("#whatif-details")).to_have_attribute("open", "")
    expect(page.locator("#whatif-form").get_by_label("Cadence (runs per week)")).to_be_visible()
    problems.assert_clean()


def run_ids(live_server) -> tuple[int, int]:
    with live_server.api() as client:
        runs = client.get("/api/v1/runs", params={"pipeline": RANKER, "limit": 2}).json()["runs"]
    return runs[0]["id"], runs[1]["id"]


def phone_pages(live_server) -> list[str]:
    a, b = run_ids(live_server)
    return [
        f"/pipelines/{RANKER}",
        f"/pipelines/{FRAUD}",
        "/review",
        f"/pipelines/{RANKER}/settings",
        f"/runs/{a}",
        f"/runs/compare?a={a}&b={b}",
    ]


def test_table_cells_wrap_between_words(page, problems, live_server):
    checked = 0
    for path in phone_pages(live_server):
        on_phone(page, live_server.url(path))
        words = page.evaluate(CELL_WORDS_JS)
        broken = [w for w in words if w["lines"] > 1]
        assert broken == [], (path, broken[:5])
        narrow = [w for w in words if w["width"] > w["cellWidth"] + 0.5]
        assert narrow == [], (path, narrow[:5])
        checked += len(words)
    assert checked > 100  # the pages had tables full of words to check
    problems.assert_clean()


def test_charts_take_the_whole_width(page, problems, live_server):
    on_phone(page, live_server.url(f"/pipelines/{RANKER}"))
    widths = page.evaluate(
        """() => Array.from(document.querySelectorAll('.chart'))
           .filter(el => el.offsetParent !== null)  // the USD charts wait behind the toggle
           .map(el => {
             const panel = el.closest('.panel');
             const style = getComputedStyle(panel);
             const inner = panel.clientWidth - parseFloat(style.paddingLeft)
                           - parseFloat(style.paddingRight);
             return {id: el.id, width: el.getBoundingClientRect().width, inner,
                     svg: el.querySelector('svg.main-svg')?.getBoundingClientRect().width};
           })"""
    )
    assert len(widths) >= 5, widths
    for w in widths:
        assert w["width"] >= w["inner"] - 1, w
        assert w["svg"] is not None and w["svg"] >= w["inner"] - 1, w  # Plotly drew it so
    problems.assert_clean()


def test_no_page_scrolls_sideways(page, problems, live_server):
    for path in [*phone_pages(live_server), "/", "/help", "/login"]:
        on_phone(page, live_server.url(path))
        widths = page.evaluate(
            "() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]"
        )
        assert widths[0] <= widths[1], (path, widths)
    problems.assert_clean()
