"""Every embedded figure is drawn by Plotly with all of its traces."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.fixtures.browser import FRAUD, RANKER, chart_state, wait_for_charts

pytestmark = pytest.mark.browser

# Traces with at least one point: Plotly draws no trace group for an empty trace (the
# quality series of the scaling probes, which report no quality, has no points).
DRAWABLE_JS = """
el => JSON.parse(document.getElementById(el.dataset.figure).textContent).data.filter(
  t => Array.isArray(t.y) && t.y.some(v => v !== null)).length
"""

RANKER_CHARTS = {
    *("chart-cost", "chart-checkpoint", "chart-goodput", "chart-quality", "chart-scaling"),
    *("chart-run_gpu", "chart-week_gpu", "chart-run_usd", "chart-week_usd"),
    *("chart-cadence_value", "chart-decay"),
    "chart-record",  # the forecast's record: the demo's runs span closed months
}


@pytest.mark.parametrize("name", [RANKER, FRAUD])
def test_every_figure_is_drawn_with_all_its_traces(page, problems, live_server, name):
    page.goto(live_server.url(f"/pipelines/{name}"))
    wait_for_charts(page)
    charts = chart_state(page)
    assert charts, "no [data-figure] element on the pipeline page"
    if name == RANKER:
        assert {c["id"] for c in charts} == RANKER_CHARTS
    for chart in charts:
        assert chart["rendered"] == "1", chart
        assert chart["svg"], chart
        assert chart["embedded"] >= 1, chart
        assert chart["plotted"] == chart["embedded"], chart
        if chart["visible"]:
            assert chart["width"] > 300, chart
    for el in page.locator("[data-figure]").all():
        drawable = el.evaluate(DRAWABLE_JS)
        assert el.locator(".cartesianlayer .trace").count() == drawable
    problems.assert_clean()


def test_cost_chart_shows_baseline_candidate_and_budget(page, problems, live_server):
    page.goto(live_server.url(f"/pipelines/{RANKER}"))
    wait_for_charts(page)
    cost = next(c for c in chart_state(page) if c["id"] == "chart-cost")
    assert cost["embedded"] == cost["plotted"] == 3
    assert cost["names"] == ["baseline", "candidate", "Budget $1,400/month"]
    legend = page.locator("#chart-cost .legendtext").all_text_contents()
    assert legend == ["baseline", "candidate", "Budget $1,400/month"]
    # The section's heading names the chart; the chart does not say it again.
    assert not "".join(page.locator("#chart-cost .gtitle").all_text_contents())
    assert page.locator("#chart-run_gpu .gtitle").text_content() == "GPU-hours per run, by cause"
    # The chart has a title a screen reader can read, and a caption linking the formulas.
    # A labelled group, not role="img": the toolbar inside holds buttons (axe: nested-interactive).
    expect(page.locator("#chart-cost")).to_have_attribute("role", "group")
    expect(page.locator("#chart-cost")).to_have_attribute("aria-label", "Expected bill by cadence")
    expect(page.locator("#projection figcaption a")).to_have_attribute("href", "/help#projection")
    problems.assert_clean()


def test_unit_toggle_shows_the_usd_charts_at_full_width(page, problems, live_server):
    page.goto(live_server.url(f"/pipelines/{RANKER}"))
    wait_for_charts(page)
    expect(page.locator("#chart-run_gpu")).to_be_visible()
    expect(page.locator("#chart-run_usd")).to_be_hidden()
    page.get_by_label("Show in").select_option("usd")
    expect(page.locator("#chart-run_usd")).to_be_visible()
    expect(page.locator("#chart-run_gpu")).to_be_hidden()
    page.wait_for_function(
        """() => ['chart-run_usd', 'chart-week_usd'].every(id => {
             const el = document.getElementById(id);
             const svg = el.querySelector('svg.main-svg');
             return svg && Math.abs(svg.getBoundingClientRect().width
                                    - el.getBoundingClientRect().width) < 2;
           })"""
    )
    ticks = page.locator("#chart-run_usd .ytick text").all_text_contents()
    assert any(t.startswith("$") for t in ticks), ticks
    problems.assert_clean()


def test_goodput_says_mfu_and_percent_ticks_are_round(page, problems, live_server):
    page.goto(live_server.url(f"/pipelines/{RANKER}"))
    wait_for_charts(page)
    legend = page.locator("#chart-goodput .legendtext").all_text_contents()
    # The ranker's runs report MFU; only its scaling probes do not.
    assert "Program (MFU; utilization where runs report none)" in legend, legend
    for chart in ("#chart-goodput", "#chart-quality"):
        ticks = page.locator(f"{chart} .yaxislayer-above .ytick text").all_text_contents()
        percents = [t for t in ticks if t.endswith("%")]
        assert percents and set(percents) <= {"0%", "25%", "50%", "75%", "100%"}, ticks
    problems.assert_clean()


def test_the_unit_survives_a_reload_through_the_url(page, problems, live_server):
    page.goto(live_server.url(f"/pipelines/{RANKER}"))
    wait_for_charts(page)
    page.get_by_label("Show in").select_option("usd")
    assert "unit=usd" in page.url
    sort = page.locator("table.runs-table thead a").first
    assert "unit=usd" in (sort.get_attribute("href") or "")
    page.reload()
    wait_for_charts(page)
    expect(page.get_by_label("Show in")).to_have_value("usd")
    expect(page.locator("#chart-run_usd")).to_be_visible()
    expect(page.locator("#chart-run_gpu")).to_be_hidden()
    # A what-if keeps it, and the sort link still carries it.
    page.locator("#whatif-form input[name=cadence]").fill("2")
    page.locator("#whatif-form button[type=submit]").click()
    expect(page.locator("#whatif-status")).to_have_text("Updated")
    assert "unit=usd" in page.url and "cadence=2" in page.url
    sort.click()
    page.wait_for_load_state()
    assert "unit=usd" in page.url
    expect(page.get_by_label("Show in")).to_have_value("usd")
    page.get_by_label("Show in").select_option("gpu")
    assert "unit=" not in page.url
    problems.assert_clean()
