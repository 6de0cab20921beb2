"""The decision card's sentence (pure)."""

from __future__ import annotations

from types import SimpleNamespace

from app.web.decision import cadence_words, decide


def row(
    variant: str, cost: float, p90: float, within: bool | None, p_over: float | None = None
) -> dict[str, object]:
    return {
        "variant": variant,
        "monthly_cost_usd": cost,
        "p90": p90,
        "within_budget": within,
        "p_over_budget": p_over,
    }


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
    # The projection's one test (within_budget) decides; the sentence names the figure.
    assert d.sentence == (
        "Twice weekly fits the $1,400 budget only with candidate (sharded input "
        "+ async checkpoints): $1,309 expected bill, p90 $1,314. Gate: PASS, every "
        "criterion passed."
    )
    assert d.affordable is True and d.verdict == "PASS" and d.tone == "good"


def test_does_not_fit_names_the_likeliest_to_fit_with_its_chance() -> None:
    d = decide(
        [
            row("baseline", 2000.0, 2100.0, False, 0.95),
            row("candidate", 1500.0, 1600.0, False, 0.6),
        ],
        1400.0,
        gate("INSUFFICIENT_DATA", "quality: about 12 more runs per arm needed."),
        2.0,
    )
    # the smaller P(bill > budget) of the two: the candidate's 60%
    assert d.sentence.startswith(
        "Twice weekly does not fit the $1,400 budget: the likeliest to stay within it, "
        "candidate: $1,500 expected bill, p90 $1,600, 60% chance over."
    )
    assert d.verdict == "NOT YET" and d.affordable is False and d.tone == "bad"
    assert d.sentence.endswith("Gate: NOT YET, quality: about 12 more runs per arm needed.")


def test_without_budget_gate_or_runs() -> None:
    assert decide([row("baseline", 900.0, 950.0, None)], None, None, 1.0).sentence == (
        "Weekly costs baseline: $900 expected bill, p90 $950. No budget is set to compare "
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


def test_one_test_in_the_sentence_and_the_colour_follows_the_verdict() -> None:
    """At the edge of the budget: expected $1,390, p90 $1,403 on $1,400, a 12% chance over
    (above the 10% tolerance, so the projection says it does not fit). The card says
    "does not fit" whatever the basis, as the gate's cost criterion does: the expected
    bill below the budget never makes it "fit"."""
    edge = [row("candidate", 1390.0, 1403.0, False, 0.12)]
    fail = gate("FAIL", "cost: does not fit the $1,400 budget, 12% chance over.")
    for basis in ("p90", "expected_bill"):
        d = decide(edge, 1400.0, fail, 2.0, basis=basis)
        assert "does not fit" in d.sentence and "12% chance over" in d.sentence
        assert d.tone == "bad" and d.affordable is False
    inside = [row("candidate", 1390.0, 1398.0, True, 0.08)]
    fits = decide(inside, 1400.0, gate("PASS", "all pass"), 2.0, basis="expected_bill")
    assert "fits the $1,400 budget" in fits.sentence and "8% chance over" in fits.sentence
    assert fits.tone == "good"
    # Affordable, but the gate fails on quality: not green.
    assert decide(inside, 1400.0, gate("FAIL", "quality"), 2.0).tone == "bad"
