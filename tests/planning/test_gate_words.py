"""The A/B gate in plain words (app/planning/gate_words.py), from hand-built results."""

from __future__ import annotations

import pytest

from app.planning.gate import (
    CriterionResult,
    GateResult,
    GateThresholds,
    Verdict,
    evaluate_gate,
)
from app.planning.gate_words import (
    LABELS,
    GateContext,
    cadence,
    dollars,
    gate_words,
    points,
    weeks,
)
from tests.fixtures.planning import BASELINE, CANDIDATE

CTX = GateContext(target_runs_per_week=2.0, current_runs_per_week=2.0, quality_metric="ndcg@10")

UTIL_PASS = CriterionResult(
    "utilization_uplift", 32.0, 10.0, (30.14, 33.86), "pass", "numbers", None, 1e-9
)
QUALITY_PASS = CriterionResult(
    "quality_non_inferiority",
    0.005,
    -0.01,
    (-0.004, 0.014),
    "pass",
    "numbers",
    None,
    0.001,
    unit="metric",
)
COST_PASS = CriterionResult(
    "projected_cost",
    1308.8593,
    1400.0,
    (1290.0, 1308.8593),
    "pass",
    "numbers",
    None,
    unit="usd_per_month",
    basis="p90",
)

COST_FAIL = CriterionResult(
    "projected_cost",
    1451.6,
    1400.0,
    (1400.0, 1451.6),
    "fail",
    "numbers",
    None,
    unit="usd_per_month",
    basis="p90",
)


def result(
    verdict: Verdict,
    *criteria: CriterionResult,
    runs: int | None = None,
    usd: float | None = None,
    nb: int = 5,
    nc: int = 5,
) -> GateResult:
    weeks_needed = runs / 2.0 if runs is not None else None
    return GateResult(
        verdict, tuple(criteria), "summary", nb, nc, runs, None, 0.8, weeks_needed, usd
    )


def rows(words: object) -> dict[str, tuple[str, str, str]]:
    return {c.name: (c.label, c.plain, c.status_label) for c in words.criteria}  # type: ignore[attr-defined]


def test_numbers_for_people() -> None:
    assert dollars(1308.8593) == "$1,309"
    assert dollars(52.0) == "$52" and dollars(-1452.4) == "-$1,452"
    assert points(31.6) == "+32" and points(4.44) == "+4.4" and points(10.0) == "+10"
    assert points(-3.2) == "-3.2" and points(-0.04) == "0" and points(5.0) == "+5"
    assert points(32.0, signed=False) == "32" and points(31.77, precise=True) == "+31.8"
    assert cadence(2.0) == "2×/week" and cadence(1.5) == "1.5×/week"
    assert cadence(1 / 3) == "0.33×/week"
    assert weeks(4.5) == "4.5 weeks" and weeks(1.0) == "1 week" and weeks(3.0) == "3 weeks"
    # 248 weeks / 52 = 4.77 years
    assert weeks(248.0) == "248 weeks (4.8 years)"


def test_pass_names_cost_quality_and_utilization() -> None:
    words = gate_words(result("PASS", UTIL_PASS, QUALITY_PASS, COST_PASS), CTX)
    assert words.verdict == "PASS"
    # $1,308.86 rounds to $1,309; uplift 32.0 points; quality passes: "not worse".
    assert words.headline == (
        "PASS: the candidate fits the $1,400 budget at 2×/week ($1,309/month), quality is "
        "not worse and utilization is up 32 points."
    )
    assert rows(words) == {
        "utilization_uplift": ("Utilization uplift", "+32 points (need +10)", "pass"),
        "quality_non_inferiority": (
            "Quality not worse",
            "ndcg@10 0.005 better (may be at most 0.01 worse)",
            "pass",
        ),
        "projected_cost": (
            "The bill at the target cadence",
            "$1,309/month of the $1,400 budget at 2×/week (p90: 9 months in 10 cost less)",
            "pass",
        ),
    }


def test_fail_on_cost_says_by_how_much() -> None:
    words = gate_words(result("FAIL", UTIL_PASS, QUALITY_PASS, COST_FAIL), CTX)
    # $1,451.60 -> $1,452; $1,452 - $1,400 = $52 over.
    assert words.verdict == "FAIL"
    assert words.headline == (
        "FAIL: the candidate costs $1,452/month at 2×/week, $52 over the $1,400 budget."
    )
    assert rows(words)["projected_cost"][1:] == (
        "$1,452/month at 2×/week, $52 over the $1,400 budget (p90: 9 months in 10 cost less)",
        "fail",
    )
    # $1,400.30 is over a $1,400 budget, but both round to $1,400: "just over", not "$0".
    nearly = CriterionResult(
        "projected_cost",
        1400.3,
        1400.0,
        None,
        "fail",
        "numbers",
        None,
        unit="usd_per_month",
        basis="expected_bill",
    )
    words = gate_words(result("FAIL", nearly), CTX)
    assert words.headline == (
        "FAIL: the candidate costs $1,400/month at 2×/week, just over the $1,400 budget."
    )
    assert rows(words)["projected_cost"][1] == (
        "$1,400/month at 2×/week, just over the $1,400 budget (expected bill)"
    )


def test_fail_on_utilization_and_quality_lists_both() -> None:
    util = CriterionResult(
        "utilization_uplift", 2.0, 10.0, (0.14, 3.86), "fail", "numbers", None, 0.99
    )
    quality = CriterionResult(
        "quality_non_inferiority",
        -0.1,
        -0.05,
        (-0.148, -0.052),
        "fail",
        "numbers",
        None,
        unit="metric",
    )
    words = gate_words(result("FAIL", util, quality, COST_PASS), CTX)
    assert words.headline == (
        "FAIL: utilization is up only 2 points, short of the +10 points needed; "
        "quality (ndcg@10) is 0.1 worse, more than the 0.05 allowed."
    )
    assert rows(words)["utilization_uplift"][1:] == ("+2 points (need +10)", "fail")
    assert rows(words)["quality_non_inferiority"][1:] == (
        "ndcg@10 0.1 worse, more than the 0.05 allowed",
        "fail",
    )


def test_not_yet_gives_runs_weeks_and_dollars() -> None:
    quality = CriterionResult(
        "quality_non_inferiority",
        0.002,
        -0.01,
        (-0.02, 0.024),
        "undecided",
        "numbers",
        9,
        unit="metric",
    )
    # 9 more runs per variant; a baseline run $280 + a candidate run $152 = $432 a pair:
    # 9 x $432 = $3,888; at today's 2 runs a week, 9 / 2 = 4.5 weeks.
    words = gate_words(
        result("INSUFFICIENT_DATA", UTIL_PASS, quality, COST_PASS, runs=9, usd=3888.0), CTX
    )
    assert words.verdict == "NOT YET"
    assert words.headline == (
        "NOT YET: quality needs about 9 more runs per variant, 4.5 weeks at today's "
        "2×/week, about $3,888."
    )
    assert rows(words)["quality_non_inferiority"][1:] == (
        "ndcg@10 0.002 better so far (may be at most 0.01 worse); needs about 9 more runs "
        "per variant, 4.5 weeks at today's 2×/week, about $3,888",
        "not yet",
    )


def test_not_yet_with_two_open_criteria_and_a_failure_under_the_minimum() -> None:
    # Two runs per arm of a minimum of three: one more run each (1 week at 1/week, one
    # pair = $432), and the cost already fails: $1,452 is $52 over $1,400.
    util = CriterionResult(
        "utilization_uplift", 32.0, 10.0, (20.0, 44.0), "undecided", "numbers", 1
    )
    quality = CriterionResult(
        "quality_non_inferiority", 0.001, -0.01, None, "undecided", "numbers", 1, unit="metric"
    )
    ctx = GateContext(2.0, 1.0, "ndcg@10")
    words = gate_words(
        result("INSUFFICIENT_DATA", util, quality, COST_FAIL, runs=1, usd=432.0, nb=2, nc=2), ctx
    )
    assert words.headline == (
        "NOT YET: utilization and quality need about 1 more run per variant, 1 week at "
        "today's 1×/week, about $432; already failing: the candidate costs $1,452/month at "
        "2×/week, $52 over the $1,400 budget."
    )
    assert rows(words)["utilization_uplift"][1:] == (
        "+32 points so far (need +10); needs about 1 more run per variant, 1 week at "
        "today's 1×/week, about $432",
        "not yet",
    )


def test_cannot_pass_says_so_instead_of_a_run_count() -> None:
    # Uplift +3.2 points against +10: the estimate is on the failing side, more runs
    # would only confirm it. The quality arm has no quality values at all.
    util = CriterionResult(
        "utilization_uplift",
        3.2,
        10.0,
        (-1.0, 7.4),
        "undecided",
        "numbers",
        None,
        0.99,
        cannot_pass=True,
    )
    quality = CriterionResult(
        "quality_non_inferiority", None, None, None, "undecided", "numbers", None, unit="metric"
    )
    words = gate_words(result("FAIL", util, quality, COST_PASS), CTX)
    assert words.headline == (
        "FAIL: utilization cannot pass with more runs (+3.2 points so far is not above the "
        "+10 points needed)."
    )
    assert rows(words)["utilization_uplift"][1:] == (
        "+3.2 points (need +10); cannot pass with more runs: +3.2 points so far is not "
        "above the +10 points needed",
        "cannot pass",
    )
    _label, plain, status = rows(words)["quality_non_inferiority"]
    assert plain.startswith("no ndcg@10 values recorded") and "send quality_value" in plain
    assert status == "not yet"
    # On the passing side, but more than 100 runs per variant would be needed.
    slow = CriterionResult(
        "utilization_uplift",
        10.4,
        10.0,
        (2.0, 18.8),
        "undecided",
        "numbers",
        None,
        cannot_pass=True,
    )
    words = gate_words(result("FAIL", slow, QUALITY_PASS, COST_PASS), CTX)
    assert words.headline == (
        "FAIL: utilization cannot pass with more runs (showing +10 points would take more "
        "than 100 more runs per variant)."
    )
    assert "runs per variant" in rows(words)["utilization_uplift"][1]
    assert rows(words)["utilization_uplift"][2] == "cannot pass"


def test_a_very_long_wait_is_said_in_years() -> None:
    quality = CriterionResult(
        "quality_non_inferiority",
        0.0004,
        -0.001,
        (-0.01, 0.011),
        "undecided",
        "numbers",
        248,
        unit="metric",
    )
    ctx = GateContext(2.0, 1.0, "log_loss")
    # 248 runs at 1/week = 248 weeks = 4.8 years; 248 x $432 = $107,136.
    words = gate_words(
        result("INSUFFICIENT_DATA", UTIL_PASS, quality, COST_PASS, runs=248, usd=107136.0), ctx
    )
    assert words.headline == (
        "NOT YET: quality needs about 248 more runs per variant, 248 weeks (4.8 years) at "
        "today's 1×/week, about $107,136."
    )
    assert rows(words)["quality_non_inferiority"][1].endswith(
        "about $107,136: more runs are unlikely to decide it"
    )


def test_real_gate_results_in_words() -> None:
    # tests/planning/test_gate.py's arms: uplift 70 - 38 = 32 points; candidate 60.8 GPU-h
    # x $2 = $121.60 a run; at 2/week a month holds 9 runs (p 2/3) or 8, so the p90 bill
    # (the gate's basis) is 9 x 121.60 = $1,094.40 <= $1,200; quality +0.005 within the
    # 0.05 margin.
    r = evaluate_gate(
        BASELINE,
        CANDIDATE,
        target_runs_per_week=2.0,
        budget_usd=1200.0,
        thresholds=GateThresholds(quality_margin=0.05),
        current_runs_per_week=1.0,
    )
    words = gate_words(r, GateContext(2.0, 1.0, "accuracy"))
    assert {c.name for c in r.criteria} <= set(LABELS)  # every criterion has a people's name
    assert words.headline == (
        "PASS: the candidate fits the $1,200 budget at 2×/week ($1,094/month, 0% chance "
        "over), quality is "
        "not worse and utilization is up 32 points."
    )
    # Margin 0.01: quality needs 12 more runs per arm at 80% power (test_gate.py works it
    # out); at 1 run a week that is 12 weeks, and 12 x ($224 baseline + $121.60
    # candidate) = $4,147.20.
    r = evaluate_gate(
        BASELINE,
        CANDIDATE,
        target_runs_per_week=2.0,
        budget_usd=1200.0,
        thresholds=GateThresholds(quality_margin=0.01),
        current_runs_per_week=1.0,
    )
    words = gate_words(r, GateContext(2.0, 1.0, "accuracy"))
    assert r.runs_needed_usd == pytest.approx(4147.2)
    assert words.headline == (
        "NOT YET: quality needs about 12 more runs per variant, 12 weeks at today's 1×/week, "
        "about $4,147."
    )


def test_close_to_the_bar_shows_a_decimal() -> None:
    # +31.77 against +31.5 would both read "+32": one decimal each, +31.8 and +31.5.
    util = CriterionResult(
        "utilization_uplift",
        31.77,
        31.5,
        (30.3, 33.3),
        "undecided",
        "numbers",
        None,
        cannot_pass=True,
    )
    words = gate_words(result("FAIL", util, QUALITY_PASS, COST_PASS), CTX)
    assert rows(words)["utilization_uplift"][1] == (
        "+31.8 points (need +31.5); cannot pass with more runs: showing +31.5 points would "
        "take more than 100 more runs per variant"
    )


def test_no_candidate_runs_yet() -> None:
    # 12 baseline runs and none of the candidate: 3 more per variant (the minimum), 3 / 2
    # = 1.5 weeks at 2 a week; the gate priced them at $197 (the baseline's runs only).
    open_ = [
        CriterionResult("utilization_uplift", None, 10.0, None, "undecided", "n", 3),
        CriterionResult(
            "quality_non_inferiority", None, -0.01, None, "undecided", "n", 3, unit="metric"
        ),
        CriterionResult(
            "projected_cost",
            None,
            900.0,
            None,
            "undecided",
            "n",
            3,
            unit="usd_per_month",
            basis="p90",
        ),
    ]
    words = gate_words(result("INSUFFICIENT_DATA", *open_, runs=3, usd=197.0, nb=12, nc=0), CTX)
    assert words.headline == (
        "NOT YET: no candidate runs yet; the gate needs about 3 more runs per variant, "
        "1.5 weeks at today's 2×/week, about $197."
    )
    assert rows(words)["projected_cost"][1:] == (
        "no candidate runs to project the monthly cost from yet; needs about 3 more runs per "
        "variant, 1.5 weeks at today's 2×/week, about $197",
        "not yet",
    )


def test_weeks_beyond_a_century_are_words() -> None:
    import math

    assert weeks(5200.0) == "5200 weeks (100.0 years)"
    assert weeks(5201.0) == weeks(math.inf) == weeks(math.nan) == "more than 100 years"
