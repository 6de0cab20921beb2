"""Attempts still running and experiments still running in this month (DOMAIN.md
section 9, "This month"): app.planning.running and what month_to_date makes of them."""

from __future__ import annotations

import pytest

from app.planning.bill import forecast_bill
from app.planning.budget_status import BudgetStatus
from app.planning.model import PlanningError
from app.planning.month_to_date import month_to_date
from app.planning.running import Running, RunningNow, experiments_expected, running_now
from app.planning.schedule import exactly

PRICE = 1.5714
TYPICAL = 8 * 14 * PRICE  # 8 workers x their usual 14 h at $1.5714 = $175.9968 ("$176")


def test_a_running_retraining_costs_its_hours_so_far_and_counts_a_whole_one() -> None:
    # DOMAIN.md section 9: 8 workers x 6 h x $1.5714 = $75.4272 so far; counts $176.
    now = running_now([Running("baseline", 8, 6.0, PRICE)], "baseline", TYPICAL, 14.0)
    assert now.so_far_usd == pytest.approx(75.4272)
    assert round(now.so_far_usd, 2) == 75.43
    assert now.counted_usd == pytest.approx(175.9968)
    assert now.production_so_far_usd == now.so_far_usd and now.warnings == ()


def test_the_nov_16_month_is_904_before_the_retrainings_still_to_start() -> None:
    now = running_now([Running("baseline", 8, 6.0, PRICE)], "baseline", TYPICAL, 14.0)
    nothing_left = forecast_bill([TYPICAL], exactly(0))
    m = month_to_date({"baseline": 728.0}, "baseline", nothing_left, 1600.0, running=now)
    # Spend to date: $728 finished + $75.43 so far = $803.43; end: $728 + $176 = $904.
    assert m.spend_to_date_usd == pytest.approx(803.4272)
    assert m.expected_end_of_month_usd == pytest.approx(728 + 175.9968)
    assert round(m.expected_end_of_month_usd) == 904
    assert m.running_attempts == 1 and m.running_so_far_usd == pytest.approx(75.4272)
    assert m.running_expected_usd == pytest.approx(175.9968)


def test_with_the_running_retraining_the_month_is_likely_over_not_over() -> None:
    # The month: $728 spent, four retrainings of $176 still to start (expected
    # $704): without the running one $1,432, within $1,600; with it $1,608, over the
    # budget in every draw (every retraining costs $176): likely_over. Spend to date
    # ($803.43) is not past the budget, so the word is not "over".
    four = forecast_bill([TYPICAL] * 12, exactly(4))
    without = month_to_date({"baseline": 728.0}, "baseline", four, 1600.0)
    assert without.expected_end_of_month_usd == pytest.approx(728 + 4 * 175.9968)
    assert without.status is BudgetStatus.WITHIN
    now = running_now([Running("baseline", 8, 6.0, PRICE)], "baseline", TYPICAL, 14.0)
    m = month_to_date({"baseline": 728.0}, "baseline", four, 1600.0, running=now)
    assert m.expected_end_of_month_usd == pytest.approx(728 + 5 * 175.9968)  # $1,607.98
    assert round(m.expected_end_of_month_usd) == 1608
    assert m.p_over_budget == 1.0 and m.status is BudgetStatus.LIKELY_OVER
    over = month_to_date({"baseline": 1700.0}, "baseline", four, 1600.0, running=now)
    assert over.status is BudgetStatus.OVER


def test_one_running_far_past_its_usual_length_is_flagged() -> None:
    # 40 h > 2 x 14 h: flagged; it counts what it has cost, 8 x 40 x 1.5714 = $502.85,
    # more than a typical retraining. 27 h (< 28 h) is not flagged.
    late = running_now([Running("baseline", 8, 40.0, PRICE)], "baseline", TYPICAL, 14.0)
    [warning] = late.warnings
    assert "running 40 h; retrainings usually take 14 h" in warning
    assert late.counted_usd == pytest.approx(502.848)
    assert (
        running_now([Running("baseline", 8, 27.0, PRICE)], "baseline", TYPICAL, 14.0).warnings == ()
    )
    m = month_to_date(
        {"baseline": 100.0}, "baseline", forecast_bill([TYPICAL], exactly(0)), None, running=late
    )
    assert m.warnings == late.warnings


def test_a_running_experiment_counts_its_cost_so_far_only() -> None:
    # A candidate attempt: 2 workers x 10 h x $3 = $60 so far, counted $60 (its pace
    # forecasts the rest); the production one $176 as above.
    now = running_now(
        [Running("candidate", 2, 10.0, 3.0), Running("baseline", 8, 6.0, PRICE)],
        "baseline",
        TYPICAL,
        None,
    )
    assert now.so_far_usd == pytest.approx(60 + 75.4272)
    assert now.production_so_far_usd == pytest.approx(75.4272)
    assert now.counted_usd == pytest.approx(60 + 175.9968) and now.count == 2


def test_experiments_go_on_at_their_pace_until_the_month_ends() -> None:
    # A candidate with 2 runs in 14 days costing $200: 2/14 x 15 days = 2.143 runs at
    # $100 = $214.29; a probe with 1 run of $70: 70 x 15 / 14 = $75. Production: nothing.
    recent = {"baseline": (4, 800.0), "candidate": (2, 200.0), "probe": (1, 70.0)}
    assert experiments_expected(recent, "baseline", 15.0) == pytest.approx(214.2857 + 75.0)
    assert experiments_expected(recent, "baseline", 0.0) == 0.0
    with pytest.raises(PlanningError):
        experiments_expected(recent, "baseline", -1.0)


def test_experiments_are_in_the_expected_end_and_p_over() -> None:
    # Spend $1,000; one retraining of $300 left; experiments $250 more: end $1,550.
    # Budget $1,500: without the experiments $1,300 (within), with them over in every
    # draw: likely_over. Shown apart as experiments_expected_usd.
    one = forecast_bill([300.0], exactly(1))
    assert (
        month_to_date({"baseline": 1000.0}, "baseline", one, 1500.0).status is BudgetStatus.WITHIN
    )
    m = month_to_date({"baseline": 1000.0}, "baseline", one, 1500.0, experiments_expected_usd=250.0)
    assert m.expected_end_of_month_usd == pytest.approx(1550.0)
    assert m.experiments_expected_usd == 250.0 and m.p_over_budget == 1.0
    assert m.status is BudgetStatus.LIKELY_OVER
    assert any("Experiments still running" in w for w in m.working)
    assert month_to_date({}, "baseline", one, None, running=RunningNow()).running_attempts == 0


def test_usual_hours_elapsed_and_days_left() -> None:
    from datetime import UTC, datetime

    from app.planning.running import days_left_in_month, elapsed_hours, usual_hours

    assert usual_hours([15.0, 12.0, 14.0]) == 14.0 and usual_hours([]) is None
    nov16 = datetime(2026, 11, 16, tzinfo=UTC)
    assert days_left_in_month(nov16) == 15.0
    assert days_left_in_month(datetime(2026, 12, 31, 12, tzinfo=UTC)) == 0.5
    assert elapsed_hours(datetime(2026, 11, 15, 18, tzinfo=UTC), nov16) == 6.0
    assert elapsed_hours(datetime(2026, 11, 16, 1, tzinfo=UTC), nov16) == 0.0
