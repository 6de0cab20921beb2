"""The decision card's sentence (pure)."""

from __future__ import annotations

from types import SimpleNamespace

from app.web.decision import cadence_words, decide


def row(variant: str, cost: float, p90: float, within: bool | None) -> dict[str, object]:
    return {"variant": variant, "monthly_cost_usd": cost, "p90": p90, "within_budget": within}


def gate(verdict: str, summary: str) -> SimpleNamespace:
    return SimpleNamespace(result=SimpleNamespace(verdict=verdict, summary=summary))


def test_fits_only_with_the_candidate_and_the_gate_passes() -> None:
    d = decide(
        [row("baseline", 2456.4, 2470.0, False), row("candidate", 1308.86, 1314.2, True)],
        1400.0,
        gate("PASS", "every criterion passed"),
        2.0,
        {"candidate": "sharded input + async checkpoints"},
    )
    # On the p90 basis (the default, the gate's): $1,314.20 <= $1,400 fits.
    assert d.sentence == (
        "Twice weekly fits the $1,400 budget (p90 bill) only with candidate (sharded input "
        "+ async checkpoints): $1,309/month expected, p90 $1,314. Gate: PASS, every "
        "criterion passed."
    )
    assert d.affordable is True and d.verdict == "PASS" and d.tone == "good"


def test_does_not_fit_names_the_cheapest_and_by_how_much() -> None:
    d = decide(
        [row("baseline", 2000.0, 2100.0, False), row("candidate", 1500.0, 1600.0, False)],
        1400.0,
        gate("INSUFFICIENT_DATA", "quality: about 12 more runs per arm needed."),
        2.0,
    )
    # cheapest on the p90 basis: $1,600 - budget $1,400 = $200 over
    assert d.sentence.startswith(
        "Twice weekly does not fit the $1,400 budget: the cheapest, candidate: "
        "$1,500/month expected, p90 $1,600, is $200 over on its p90 bill."
    )
    assert d.verdict == "NOT YET" and d.affordable is False and d.tone == "bad"
    assert d.sentence.endswith("Gate: NOT YET, quality: about 12 more runs per arm needed.")


def test_without_budget_gate_or_runs() -> None:
    assert decide([row("baseline", 900.0, 950.0, None)], None, None, 1.0).sentence == (
        "Weekly costs baseline: $900/month expected, p90 $950. No budget is set to compare "
        "with. Gate: no candidate to test yet."
    )
    assert decide([], 100.0, None, 3.0).affordable is None
    assert cadence_words(1.5) == "1.5 runs a week" and cadence_words(0.5) == "Every two weeks"


def test_the_gate_reason_is_the_gate_sections_own_sentence() -> None:
    # The gate section shows "PASS: the candidate fits ..."; the card keeps the words after
    # the verdict so both say the same thing.
    words = "the candidate fits the $1,400 budget at 2×/week ($1,314/month)."
    with_headline = SimpleNamespace(
        result=SimpleNamespace(verdict="PASS", summary="All three criteria pass."),
        headline=f"PASS: {words}",
    )
    d = decide([row("candidate", 1308.86, 1314.2, True)], 1400.0, with_headline, 2.0)
    assert d.sentence.endswith(f"Gate: PASS, {words}")
    assert "All three criteria" not in d.sentence


def test_one_basis_in_the_sentence_and_the_colour_follows_the_verdict() -> None:
    """At the edge of the budget: expected $1,390, p90 $1,403 on $1,400. On the p90 basis
    it does not fit ($3 over), as the gate's cost criterion says; on the expected-bill
    basis it fits. Either way the card never says "fits" beside a FAIL in green."""
    edge = [row("candidate", 1390.0, 1403.0, True)]
    fail = gate("FAIL", "cost: the p90 bill $1,403 is $3 over the $1,400 budget.")
    on_p90 = decide(edge, 1400.0, fail, 2.0, basis="p90")
    assert "does not fit" in on_p90.sentence and "$3 over on its p90 bill" in on_p90.sentence
    assert on_p90.tone == "bad"
    on_expected = decide(edge, 1400.0, gate("PASS", "all pass"), 2.0, basis="expected_bill")
    assert "fits the $1,400 budget (expected bill)" in on_expected.sentence
    assert on_expected.tone == "good"
    # Affordable on its basis, but the gate fails on quality: not green.
    assert decide(edge, 1400.0, gate("FAIL", "quality"), 2.0, basis="expected_bill").tone == "bad"
