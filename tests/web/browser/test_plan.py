"""The overview's cadence plan: folded at first; moving the org budget changes the
sentence and the table together, and the link keeps the budget."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.fixtures.browser import RANKER

pytestmark = pytest.mark.browser


def test_moving_the_org_budget_moves_the_sentence_and_the_table_together(
    page, problems, live_server
) -> None:
    # A budget with room for everything keeps the ranker weekly (its best cadence, bill
    # plus staleness); $1 under that plan's p90 cannot keep it, so the ranker, the one
    # pipeline with a value curve, must slow down.
    with live_server.api() as api:
        roomy = api.get("/api/v1/portfolio/plan", params={"budget": 100_000}).json()
        tight_budget = int(roomy["bill_p90_usd"]) - 1
        tight = api.get("/api/v1/portfolio/plan", params={"budget": tight_budget}).json()
    assert tight["feasible"], tight["sentence"]
    page.goto(live_server.url("/"))
    section = page.locator("[data-plan]")
    expect(section.locator("[data-plan-folded]")).to_be_hidden()  # folded: not even shown
    section.locator("summary").click()
    expect(section.locator("[data-plan-folded]")).to_be_visible()

    sentence = section.locator("[data-plan-sentence]")
    proposed = section.locator(f"[data-plan-row='{RANKER}'] [data-proposed]")
    for budget, answer, cadence in (
        (100_000, roomy, "1×/week"),
        (tight_budget, tight, "0.5×/week"),
    ):
        section.get_by_label("Org budget ($ a month)").fill(str(budget))
        section.get_by_role("button", name="Plan").click()
        expect(sentence).to_have_text(answer["sentence"])
        expect(proposed).to_have_text(cadence)
        assert f"budget={budget}" in page.url and "plan=1" in page.url
        expect(section.get_by_label("Org budget ($ a month)")).to_have_value(str(budget))
    assert f"move {RANKER} to every other week" in tight["sentence"]
    # The link reproduces the view.
    page.goto(page.url)
    expect(sentence).to_have_text(tight["sentence"])
    problems.assert_clean()
