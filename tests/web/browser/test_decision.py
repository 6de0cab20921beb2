"""The decision card: first on the page, follows the what-if, agrees with the API."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.web.browser.support import RANKER, wait_for_charts
from tests.web.browser.test_whatif import wait_for_update

pytestmark = pytest.mark.browser


def costs_in(sentence: str) -> list[float]:
    """The "$1,309/month" figures of the sentence, in order."""
    return [float(v.replace(",", "")) for v in re.findall(r"\$([\d,]+)/month", sentence)]


def test_the_answer_is_first_follows_the_what_if_and_matches_the_api(page, problems, live_server):
    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto(live_server.url(f"/pipelines/{RANKER}"))
    wait_for_charts(page)
    card = page.locator("#decision")
    box = card.bounding_box()
    assert box is not None and box["y"] + box["height"] <= 900, box  # the first screen
    sentence = page.get_by_test_id("decision").inner_text()
    assert sentence.startswith("Twice weekly")
    assert re.search(r"Gate: (PASS|FAIL|NOT YET)", sentence), sentence
    # Each variant's figure is the API's projection for the same scenario.
    with live_server.api() as client:
        api = client.get(f"/api/v1/pipelines/{RANKER}/projection", params={"cadence": 2}).json()
    expected = {
        v: next(c for c in p["cadences"] if c["runs_per_week"] == 2)["monthly_cost_usd"]
        for v, p in api["projections"].items()
    }
    # The cost part names each variant's median projection; the gate part is the gate's
    # own sentence (its cost criterion uses the cost basis, p90 by default), as the API says.
    cost_part, gate_part = sentence.split(" Gate: ", 1)
    with live_server.api() as client:
        gate = client.get(f"/api/v1/pipelines/{RANKER}/gate", params={"cadence": 2}).json()
    assert gate_part.split(", ", 1)[1] == gate["headline"].split(": ", 1)[1]
    shown = costs_in(cost_part)
    assert shown and all(any(abs(s - round(e)) <= 0.5 for e in expected.values()) for s in shown), (
        shown,
        expected,
    )

    # The card follows the what-if, in place.
    cadence = page.locator("#whatif-form").get_by_label("Cadence (runs per week)")
    wait_for_update(page, lambda: cadence.fill("3"))
    expect(page.get_by_test_id("decision")).to_contain_text("Three times a week")
    after = costs_in(page.get_by_test_id("decision").inner_text().split(" Gate: ")[0])
    assert after and after != shown
    problems.assert_clean()
