"""The CI cost gate's arithmetic and limits."""

from __future__ import annotations

import pytest
from cadence_client.cost_check import CostLimits, check_cost


def test_the_worked_example_twice_weekly_at_70_percent_is_plus_8_6_percent() -> None:
    # DOMAIN.md §1: weekly at 38% costs 112 GPU-h x $2.50 x 52/12 = $1,213.33 a month;
    # twice weekly at 70%: 112 x 38/70 = 60.8 GPU-h, x $2.50 x 2 x 52/12 = $1,317.33.
    # Increase $104.00 = +8.57%.
    today, proposed = 1213.33, 1317.33
    result = check_cost(today, proposed, CostLimits(max_increase_pct=10))
    assert result.passed
    assert result.increase_usd == pytest.approx(104.0)
    assert result.increase_pct == pytest.approx(8.5715, abs=1e-3)
    over = check_cost(today, proposed, CostLimits(max_increase_pct=5, max_increase_usd=100))
    assert not over.passed
    assert over.breaches == (
        "the expected bill rises +8.6%, over the 5% limit",
        "the expected bill rises $104.00, over the $100.00 limit",
    )


def test_a_limit_equal_to_the_figure_passes_and_no_limits_always_pass() -> None:
    assert check_cost(100.0, 110.0, CostLimits(max_increase_pct=10)).passed
    assert check_cost(100.0, 110.0, CostLimits(max_increase_usd=10)).passed
    assert check_cost(100.0, 110.0, CostLimits(max_monthly_usd=110)).passed
    assert check_cost(100.0, 1e9, CostLimits()).passed


def test_the_monthly_ceiling_and_a_saving() -> None:
    result = check_cost(900.0, 1200.0, CostLimits(max_monthly_usd=1000))
    assert result.breaches == (
        "the proposed expected bill $1,200.00 a month is over the $1,000.00 limit",
    )
    saving = check_cost(900.0, 600.0, CostLimits(max_increase_pct=0, max_increase_usd=0))
    assert saving.passed and saving.increase_pct == pytest.approx(-33.333, abs=1e-3)


def test_from_nothing_any_increase_breaks_a_percentage_limit() -> None:
    result = check_cost(0.0, 5.0, CostLimits(max_increase_pct=1000))
    assert result.increase_pct is None
    assert result.breaches == ("the expected bill rises from $0, over the 1000% limit",)


def test_the_ceiling_and_the_budget_read_the_cost_basis() -> None:
    # Expected bill $1,213.33 (within $1,300), p90 bill $1,400 (over it): on the p90
    # basis the budget is breached and the sentence names the p90 bill; the rise is
    # still expected bill against expected bill (+$13.33 on $1,200).
    limits = CostLimits(max_increase_usd=20, budget_usd=1300)
    on_p90 = check_cost(1200.0, 1213.33, limits, judged_usd=1400.0, basis="p90")
    assert on_p90.breaches == (
        "the proposed p90 bill $1,400.00 a month is over the pipeline's $1,300.00 budget",
    )
    assert on_p90.judged_usd == 1400.0 and on_p90.increase_usd == pytest.approx(13.33)
    on_expected = check_cost(1200.0, 1213.33, limits, basis="expected_bill")
    assert on_expected.passed and on_expected.judged_usd == 1213.33
