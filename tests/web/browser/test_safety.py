"""Hostile names are shown as text, never run; pipelines without data explain themselves."""

from __future__ import annotations

import re
from urllib.parse import quote

import pytest
from playwright.sync_api import expect

from tests.fixtures.browser import (
    EMPTY_PIPELINE,
    FRAUD,
    XSS_DISPLAY_NAME,
    XSS_PIPELINE,
    XSS_TAG,
    XSS_VARIANT,
    wait_for_charts,
)

pytestmark = pytest.mark.browser


def assert_nothing_injected(page, base_url: str) -> None:
    expect(page.locator("img[src=x]")).to_have_count(0)
    expect(page.locator("img")).to_have_count(0)  # the app draws no <img> at all
    # No script element came from data: only the page's own scripts and JSON figures.
    sources = page.locator("script").evaluate_all(
        "els => els.map(s => s.type === 'application/json' ? 'json' : s.src)"
    )
    for src in sources:
        assert src == "json" or src.startswith(base_url + "/static/"), sources


HOSTILE_PAGES = {
    "overview": "/",
    "pipeline": f"/pipelines/{XSS_PIPELINE}",
    "pipeline-gate": f"/pipelines/{XSS_PIPELINE}?baseline={quote(XSS_VARIANT)}",
    "review": "/review",
}


@pytest.mark.parametrize("path", HOSTILE_PAGES.values(), ids=HOSTILE_PAGES.keys())
def test_hostile_names_are_shown_as_text(page, problems, live_server, path):
    page.goto(live_server.url(path))
    wait_for_charts(page)
    expect(page.get_by_text(XSS_DISPLAY_NAME, exact=True).first).to_be_visible()
    assert XSS_DISPLAY_NAME in page.locator("main").inner_text()
    if path.startswith("/pipelines/"):
        assert XSS_DISPLAY_NAME in page.title()
        main = page.locator("main").text_content()
        assert XSS_VARIANT in main
        assert f"note={XSS_TAG}" in main
        expect(page.locator(".tag", has_text=f"note={XSS_TAG}").first).to_be_visible()
        # The hostile variant is a plain option of the gate's selects.
        options = page.locator(".gate-form select[name=baseline] option").all_text_contents()
        assert XSS_VARIANT in options
        # ... and a legend entry of the cost chart, as text (Plotly escapes it too).
        legend = page.locator("#chart-cost .legendtext").all_text_contents()
        assert legend == [XSS_VARIANT, "candidate", "Budget $500/month"]
    if "baseline=" in path:  # the gate compares the hostile variant with the candidate
        expect(page.locator(".gate-verdict .verdict")).to_be_visible()
        expect(page.locator(".gate-verdict")).to_contain_text(f"Baseline: variant {XSS_VARIANT}")
    assert_nothing_injected(page, live_server.base_url)
    problems.assert_clean()  # includes: no dialog opened


def test_hostile_names_survive_the_in_place_update(page, problems, live_server):
    page.goto(live_server.url(f"/pipelines/{XSS_PIPELINE}"))
    wait_for_charts(page)
    with page.expect_response(lambda r: "/whatif?" in r.url and r.status == 200):
        page.locator("#ut").fill("0.7")
    expect(page.locator("#whatif-status")).to_have_text("Updated")
    sections = page.locator("#whatif-sections")
    expect(sections.locator(".big-number .label").first).to_have_text(
        f"{XSS_VARIANT}: a typical month at 2×/week", use_inner_text=False
    )
    levers = page.locator("#whatif-engineer #levers")  # re-rendered with the scenario too
    expect(levers).to_contain_text(f"newest {XSS_VARIANT} runs")
    assert_nothing_injected(page, live_server.base_url)
    problems.assert_clean()


def test_a_pipeline_without_runs_explains_what_to_do(page, problems, live_server):
    page.goto(live_server.url(f"/pipelines/{EMPTY_PIPELINE}"))
    expect(page.locator("h1")).to_have_text("Empty pipeline")
    expect(page.locator("[data-figure]")).to_have_count(0)
    projection = page.locator("#projection")
    expect(projection.locator("[data-figure]")).to_have_count(0)
    expect(projection.locator(".empty")).to_be_visible()
    # What to do in a reader's words (issue 28), not the API path to post to.
    expect(projection.locator(".empty")).to_contain_text("No runs yet")
    expect(projection.locator(".empty")).to_contain_text("Reporting runs")
    # One box per missing thing (issue 35): the runs are missing once, said once; the
    # sections that need runs say nothing more of their own.
    expect(page.locator(".empty", has_text="No runs yet")).to_have_count(1)
    for section in ("levers", "checkpoints", "goodput", "badput"):
        expect(page.locator(f"#{section} .empty")).to_have_count(0)
    expect(page.locator("#runs")).to_contain_text("All 0 runs")
    expect(page.get_by_text("No runs yet", exact=False).first).to_be_visible()

    # The what-if form still answers (with the same explanation) instead of breaking.
    with page.expect_response(lambda r: "/whatif?" in r.url) as response:
        page.locator("#whatif-form").get_by_label("Cadence (runs per week)").fill("3")
    assert response.value.status == 200
    expect(page.locator("#whatif-status")).to_have_text("Updated")
    expect(page.locator("#projection .empty")).to_contain_text("No runs yet")
    problems.assert_clean()


def test_overview_card_of_an_empty_pipeline(page, problems, live_server):
    page.goto(live_server.url("/"))
    card = page.locator(f"article.card[data-pipeline={EMPTY_PIPELINE}]")
    expect(card.locator(".empty")).to_contain_text("No runs yet")
    expect(card.locator("[data-figure]")).to_have_count(0)
    problems.assert_clean()


def test_a_gate_without_its_candidate_names_the_missing_variant(page, problems, live_server):
    page.goto(live_server.url(f"/pipelines/{FRAUD}"))
    wait_for_charts(page)
    message = page.locator("[data-empty=gate]")
    expect(message).to_be_visible()
    expect(message).to_contain_text("No runs of variant 'candidate' yet")
    expect(message).to_contain_text('"variant": "candidate"')
    expect(message).to_contain_text("Variants so far: baseline.")
    expect(page.locator(".gate-verdict")).to_have_count(0)
    # The rest of the page still has its charts.
    expect(page.locator("#projection [data-figure]")).to_have_count(1)
    expect(page.locator(".big-number .value").first).to_have_text(re.compile(r"^\$[\d,]+$"))
    problems.assert_clean()
