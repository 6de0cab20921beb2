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
        "the monthly cost rises +8.6%, over the 5% limit",
        "the monthly cost rises $104.00, over the $100.00 limit",
    )


def test_a_limit_equal_to_the_figure_passes_and_no_limits_always_pass() -> None:
    assert check_cost(100.0, 110.0, CostLimits(max_increase_pct=10)).passed
    assert check_cost(100.0, 110.0, CostLimits(max_increase_usd=10)).passed
    assert check_cost(100.0, 110.0, CostLimits(max_monthly_usd=110)).passed
    assert check_cost(100.0, 1e9, CostLimits()).passed


def test_the_monthly_ceiling_and_a_saving() -> None:
    result = check_cost(900.0, 1200.0, CostLimits(max_monthly_usd=1000))
    assert result.breaches == ("the proposed monthly cost $1,200.00 is over the $1,000.00 limit",)
    saving = check_cost(900.0, 600.0, CostLimits(max_increase_pct=0, max_increase_usd=0))
    assert saving.passed and saving.increase_pct == pytest.approx(-33.333, abs=1e-3)


def test_from_nothing_any_increase_breaks_a_percentage_limit() -> None:
    result = check_cost(0.0, 5.0, CostLimits(max_increase_pct=1000))
    assert result.increase_pct is None
    assert result.breaches == ("the monthly cost rises from $0, over the 1000% limit",)
