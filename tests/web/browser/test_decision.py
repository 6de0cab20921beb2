"""The decision card: first on the page, follows the what-if, agrees with the API."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.fixtures.browser import RANKER, wait_for_charts, wait_for_update

pytestmark = pytest.mark.browser


def costs_in(sentence: str) -> list[float]:
    """The "$1,309 expected bill" figures of the sentence, in order."""
    found = re.findall(r"\$([\d,]+) expected bill", sentence)
    return [float(v.replace(",", "")) for v in found]


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


def test_at_the_edge_of_the_budget_no_fits_beside_a_fail(page, problems, live_server):
    """A price that puts the candidate's expected bill under the budget and its p90 bill
    over it (the gate's cost basis): the card must not say "fits" next to the gate's
    FAIL, and it is not green."""
    with live_server.api() as client:

        def at(price: float) -> dict[str, float]:
            params = {"cadence": 2, "price": price, "variant": "candidate"}
            body = client.get(f"/api/v1/pipelines/{RANKER}/projection", params=params).json()
            proj = body["projections"]["candidate"]
            c = next(c for c in proj["cadences"] if c["runs_per_week"] == 2)
            return {"expected": c["expected_bill_usd"], "p90": c["bill_p90_usd"],
                    "budget": body["scenario"]["budget_usd"]}  # fmt: skip

        # Every dollar of the bill scales with the price: just past the price where the
        # p90 bill meets the budget, the p90 is over it and the expected bill still under.
        base = at(2.5)
        edge = round(2.5 * base["budget"] / base["p90"] * 1.002, 4)
        figures = at(edge)
        assert figures["expected"] <= figures["budget"] < figures["p90"], (edge, figures)
    page.goto(live_server.url(f"/pipelines/{RANKER}?price={edge}"))
    wait_for_charts(page)
    sentence = page.get_by_test_id("decision").inner_text()
    verdict = page.get_by_test_id("decision-verdict").inner_text()
    if verdict == "FAIL":
        assert "fits the" not in sentence.split(" Gate: ")[0], sentence
    # The one test (P(bill > budget) at or above 10%) says "does not fit", with the chance.
    assert "does not fit" in sentence and "% chance over" in sentence, sentence
    assert page.locator("#decision").get_attribute("data-tone") != "good"
    problems.assert_clean()
