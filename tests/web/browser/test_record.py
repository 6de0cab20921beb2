"""The forecast's record in a real browser: the pipeline page says it in one sentence,
the same as the API's, and draws the band against the bill; the portfolio says the
organisation's."""

from __future__ import annotations

import re

import httpx
import pytest
from playwright.sync_api import expect

from tests.fixtures.browser import RANKER, chart_state, wait_for_charts

pytestmark = pytest.mark.browser

SENTENCE = re.compile(
    r"The p90 was exceeded in (\d+) of the last (?:month|(\d+) months); (\d+) of (\d+) bills? "
    r"fell inside the forecast band; mean error \d+%\."
)


def test_the_pipeline_page_reads_the_record_sentence(page, problems, live_server):
    page.goto(live_server.url(f"/pipelines/{RANKER}"))
    sentence = page.locator("[data-record-sentence]")
    expect(sentence).to_be_visible()
    text = sentence.inner_text()
    found = SENTENCE.fullmatch(text)
    assert found is not None, text
    exceeded, months = int(found.group(1)), int(found.group(2) or 1)
    assert 0 <= exceeded <= months and int(found.group(4)) == months
    api = httpx.get(live_server.url(f"/api/v1/pipelines/{RANKER}/forecast-record")).json()
    assert api["summary"]["sentence"] == text and api["summary"]["months"] == months
    # The chart and its notes are folded under the sentence (the manager's part stays two
    # screens); opened, the chart is drawn the width of the panel.
    wait_for_charts(page)
    expect(page.locator("#chart-record")).to_be_hidden()
    page.locator("#record summary").click()
    # The demo's runs began before the record: its months are backtested, and it says so.
    expect(page.locator("[data-record-backtested]")).to_contain_text("backtested")
    page.wait_for_function(
        """() => { const c = document.getElementById('chart-record');
                   const svg = c.querySelector('svg.main-svg');
                   return svg && svg.getBoundingClientRect().width >= c.clientWidth - 1; }"""
    )
    chart = next(c for c in chart_state(page) if c["id"] == "chart-record")
    assert chart["svg"] and chart["visible"] and chart["drawn"] == 4, chart
    assert chart["width"] > 1000, chart  # the panel's width at 1400 px, not Plotly's 700
    assert chart["names"] == ["p10", "Forecast band (p10 to p90)", "Expected bill", "The bill"]
    problems.assert_clean()


def test_the_portfolio_says_the_organisations_record(page, problems, live_server):
    page.goto(live_server.url("/"))
    # No forecast has been kept yet on this server's months: the sentence says so.
    expect(page.locator("[data-total=record]")).to_contain_text(
        re.compile(r"No pipeline has a closed month to score yet|pipeline-months")
    )
    problems.assert_clean()
