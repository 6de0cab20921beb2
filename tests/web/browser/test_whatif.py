"""The what-if controls: moving one changes the projected cost in place, and the URL keeps it."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.fixtures.browser import RANKER, chart_state, money, wait_for_charts, wait_for_update

pytestmark = pytest.mark.browser

CONTROL_LABELS = [
    "Cadence (runs per week)",
    "Utilization target",
    "Price per GPU-hour (USD)",
    "Workers",
    "Failure rate (per instance-hour)",
    "Checkpoint interval (hours)",
    "Budget per month (USD)",
    "Weeks in a month",
]


def open_ranker(page, live_server, query: str = "") -> None:
    page.goto(live_server.url(f"/pipelines/{RANKER}{query}"))
    wait_for_charts(page)


def baseline_cost(page) -> str:
    return page.locator(
        ".big-number[data-variant=baseline] [data-testid=monthly-cost]"
    ).inner_text()


def cost_figure_y(page) -> list[float]:
    return page.evaluate("document.getElementById('chart-cost').data[0].y")


def test_utilization_slider_lowers_the_cost_and_the_link_reproduces_it(page, problems, live_server):
    open_ranker(page, live_server)
    first = page.locator("[data-testid=monthly-cost]").first
    assert first.inner_text() == baseline_cost(page)  # baseline comes first
    before = first.inner_text()
    y_before = cost_figure_y(page)
    expect(page.locator("#ut-out")).to_have_text(re.compile(r"as observed \(\d+%\)"))

    wait_for_update(page, lambda: page.locator("#ut").fill("0.7"))

    after = first.inner_text()
    assert after != before
    assert money(after) < money(before), (before, after)  # 38% -> 70% uses fewer GPU-hours
    # Same work at 70% instead of ~38% utilization: about 38/70 of the GPU-hours.
    assert 0.45 < money(after) / money(before) < 0.65
    expect(page.locator("#ut-out")).to_have_text("70%")
    assert "utilization_target=0.7" in page.url
    # The chart was redrawn from the new figure, not left as it was.
    wait_for_charts(page)
    assert cost_figure_y(page) != y_before
    cost_chart = next(c for c in chart_state(page) if c["id"] == "chart-cost")
    assert cost_chart["plotted"] == cost_chart["embedded"] == 3

    # The URL is a link to this view: opening it shows the same number.
    shared = page.url
    open_ranker(page, live_server, shared.split(f"/pipelines/{RANKER}", 1)[1])
    assert page.locator("[data-testid=monthly-cost]").first.inner_text() == after
    expect(page.locator("#ut")).to_have_value("0.7")
    expect(page.locator("#ut-out")).to_have_text("70%")
    problems.assert_clean()


def test_cadence_input_changes_the_headline(page, problems, live_server):
    open_ranker(page, live_server)
    label = page.locator(".big-number[data-variant=baseline] .label")
    expect(label).to_have_text(re.compile(r"at 2×/week$"))
    at_two = money(baseline_cost(page))
    cadence = page.locator("#whatif-form").get_by_label("Cadence (runs per week)")
    wait_for_update(page, lambda: cadence.fill("3"))
    expect(label).to_have_text(re.compile(r"at 3×/week$"))
    at_three = money(baseline_cost(page))
    assert at_three == pytest.approx(1.5 * at_two, abs=2)  # linear in the cadence
    assert "cadence=3" in page.url
    # The candidate's headline moved with it.
    expect(page.locator(".big-number[data-variant=candidate] .label")).to_have_text(
        re.compile(r"at 3×/week$")
    )
    problems.assert_clean()


def test_invalid_what_if_value_is_reported_not_applied(page, problems, live_server):
    open_ranker(page, live_server)
    before = baseline_cost(page)
    price = page.locator("#whatif-form").get_by_label("Price per GPU-hour (USD)")
    with page.expect_response(lambda r: "/whatif?" in r.url) as response:
        price.fill("-5")
    assert response.value.status == 422
    expect(page.locator("#whatif-status")).to_have_text(re.compile(r"^Could not update: price"))
    assert baseline_cost(page) == before
    assert "price=-5" not in page.url
    # The rejected request is the only problem: no script error, no console noise.
    assert problems.page_errors == []
    assert [r.split(" ")[0] for r in problems.bad_responses] == ["422"]


def test_what_if_controls_have_labels(page, problems, live_server):
    open_ranker(page, live_server)
    form = page.locator("#whatif-form")
    controls = form.locator("input:not([type=hidden]), select")
    assert controls.count() == len(CONTROL_LABELS)
    for i in range(controls.count()):
        if controls.nth(i).get_attribute("type") == "range":
            continue  # see test_utilization_slider_is_labelled
        expect(controls.nth(i)).to_have_accessible_name(re.compile(r"\w{3}"))
    for label in CONTROL_LABELS:
        if label != "Utilization target":
            control = form.get_by_label(label)
            expect(control).to_have_count(1)
            assert control.evaluate("el => el.tagName") in ("INPUT", "SELECT")
    expect(form.get_by_role("slider")).to_have_count(1)
    expect(page.locator("#whatif-status")).to_have_attribute("role", "status")
    problems.assert_clean()


def test_utilization_slider_is_labelled(page, live_server):
    open_ranker(page, live_server)
    slider = page.locator("#ut")
    expect(slider).to_have_accessible_name(re.compile(r"^Utilization target"), timeout=500)
    expect(page.locator("#whatif-form").get_by_label("Utilization target")).to_have_attribute(
        "type", "range", timeout=500
    )


def test_keyboard_moves_the_slider_and_the_cost(page, problems, live_server):
    open_ranker(page, live_server)
    before = money(baseline_cost(page))
    cadence = page.locator("#whatif-form").get_by_label("Cadence (runs per week)")
    cadence.focus()
    page.keyboard.press("Tab")  # from the cadence box to the slider, as a keyboard user would
    slider = page.locator("#ut")
    expect(slider).to_be_focused()
    outline = slider.evaluate("el => getComputedStyle(el).outlineStyle")
    assert outline != "none"  # keyboard focus is visible
    start = float(slider.input_value())

    for _ in range(10):
        page.keyboard.press("ArrowRight")
    value = slider.input_value()
    assert float(value) == pytest.approx(start + 0.10)
    expect(page.locator("#ut-out")).to_have_text(f"{round(100 * float(value))}%")
    # Presses may start several updates; the last one puts its value in the URL.
    page.wait_for_url(re.compile(rf"[?&]utilization_target={re.escape(value)}(&|$)"))
    expect(page.locator("#whatif-status")).to_have_text("Updated")
    assert money(baseline_cost(page)) < before
    problems.assert_clean()
