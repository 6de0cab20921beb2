"""Runs in a named month, this month so far, the budget words, retrainings from attempts
(DOMAIN.md sections 2 and 9, methodology.md §5.1, §5.2, §5.4)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from app.planning.bill import forecast_bill
from app.planning.budget_status import BudgetStatus, StatusThresholds, budget_status
from app.planning.model import PlanningError
from app.planning.month_to_date import month_to_date
from app.planning.retraining import Attempt, Outcome, group_retrainings, recent_window
from app.planning.schedule import (
    calendar_month_runs,
    exactly,
    remaining_runs,
    scheduled_starts,
    typical_month_runs,
)

NEWEST = datetime(2026, 11, 28, tzinfo=UTC)  # a Saturday, 00:00 UTC


def test_calendar_month_schedule_every_seven_over_k_days() -> None:
    # 2 runs/week = every 3.5 days after Sat Nov 28 00:00: Dec 1 12:00, 5, 8 12:00, 12,
    # 15 12:00, 19, 22 12:00, 26, 29 12:00 (Jan 2 is next month): 9 starts.
    assert calendar_month_runs(NEWEST, 2, 2026, 12) == exactly(9)
    # Once a week: Dec 5, 12, 19, 26: 4. February 2027 at once a week after Jan 30
    # 00:00: Feb 6, 13, 20, 27: 4.
    assert calendar_month_runs(NEWEST, 1, 2026, 12) == exactly(4)
    assert calendar_month_runs(datetime(2027, 1, 30, tzinfo=UTC), 1, 2027, 2) == exactly(4)
    # A start exactly at the month's first instant counts in that month, not the last:
    # newest Nov 24 00:00 weekly -> Dec 1 00:00 is in December (Dec 1, 8, 15, 22, 29).
    assert calendar_month_runs(datetime(2026, 11, 24, tzinfo=UTC), 1, 2026, 12) == exactly(5)
    assert calendar_month_runs(NEWEST, 0, 2026, 12) == exactly(0)


def test_weekday_schedule() -> None:
    # Mondays and Thursdays in December 2026 (Dec 1 is a Tuesday): Thu 3, 10, 17, 24, 31
    # and Mon 7, 14, 21, 28: 9.
    assert calendar_month_runs(NEWEST, 2, 2026, 12, weekdays={0, 3}) == exactly(9)
    with pytest.raises(PlanningError, match="weekdays"):
        calendar_month_runs(NEWEST, 2, 2026, 12, weekdays={7})


def test_remaining_runs_this_month() -> None:
    # Now Dec 16 09:00 with the schedule above: Dec 19, 22 12:00, 26, 29 12:00 remain: 4.
    now = datetime(2026, 12, 16, 9, tzinfo=UTC)
    assert remaining_runs(NEWEST, 2, now) == exactly(4)
    # A naive datetime is read as UTC.
    assert remaining_runs(NEWEST.replace(tzinfo=None), 2, now.replace(tzinfo=None)) == exactly(4)
    start, end = now, now - timedelta(days=1)
    assert scheduled_starts(NEWEST, 2, start, end) == 0


def test_typical_month_distribution() -> None:
    # 3 runs/week: m = 13.0 exactly -> N = 13; 1.5/week: m = 6.5 -> 7 or 6 at 1/2 each.
    assert typical_month_runs(3) == exactly(13)
    half = typical_month_runs(1.5)
    assert half.counts == (7, 6) and half.probabilities == pytest.approx((0.5, 0.5))
    assert half.mean == pytest.approx(6.5)


def test_month_to_date_over_already() -> None:
    # The review's month: baseline $1,147, candidate $598, probe $283 = $2,028 on a
    # $1,400 budget: over already, whatever the rest of the month brings. Experiments
    # $598 + $283 = $881, 881 / 2028 = 43.4% of the spend. Still to start: 2 baseline
    # retrainings at $160 = $320 expected: end of month $2,348.
    remaining = forecast_bill([100.0, 220.0], exactly(2), seed=0)
    mtd = month_to_date(
        {"baseline": 1147.0, "candidate": 598.0, "probe": 283.0}, "baseline", remaining, 1400.0
    )
    assert mtd.spend_to_date_usd == pytest.approx(2028.0)
    assert mtd.experiments_usd == pytest.approx(881.0)
    assert mtd.experiments_share == pytest.approx(0.4344, abs=1e-4)
    assert mtd.expected_end_of_month_usd == pytest.approx(2348.0)
    assert mtd.status is BudgetStatus.OVER and mtd.status == "over"
    assert mtd.p_over_budget == 1.0


def test_month_to_date_status_from_the_end_of_month_distribution() -> None:
    # Spend $900, 4 retrainings left from a window of ten $100 and ten $300 (mean $200;
    # stretched by 1.089 to $91.1 / $308.9): expected end $900 + 4 x 200 = $1,700.
    # Against $1,900 the rest must exceed $1,000: 3+ of the 4 at $308.9 (K = 3 gives
    # 91.1 + 3 x 308.9 = 1,017.8; K = 2 gives 800), about 5/16 = 31%: at_risk.
    # Against $1,500, more than $600: K >= 2 (3 x 91.1 + 308.9 = 582 is not), about
    # 11/16 = 69%: likely_over. Against $3,000: within (even 4 x 308.9 = 1,236 more
    # stays under).
    remaining = forecast_bill([100.0] * 10 + [300.0] * 10, exactly(4), seed=4)
    spend = {"prod": 900.0}
    at_risk = month_to_date(spend, "prod", remaining, 1900.0)
    assert at_risk.status is BudgetStatus.AT_RISK
    assert 0.2 < (at_risk.p_over_budget or 0.0) < 0.45
    likely = month_to_date(spend, "prod", remaining, 1500.0)
    assert likely.status is BudgetStatus.LIKELY_OVER
    assert likely.expected_end_of_month_usd == pytest.approx(1700.0)
    within = month_to_date(spend, "prod", remaining, 3000.0)
    assert within.status is BudgetStatus.WITHIN and within.p_over_budget == 0.0
    unbudgeted = month_to_date(spend, "prod", remaining, None)
    assert unbudgeted.status is None and unbudgeted.p_over_budget is None
    assert unbudgeted.experiments_share == 0.0


def test_budget_status_thresholds_are_parameters() -> None:
    assert budget_status(100.0, 0.5, 1000.0) is BudgetStatus.LIKELY_OVER
    assert budget_status(100.0, 0.1, 1000.0) is BudgetStatus.AT_RISK
    assert budget_status(100.0, 0.0999, 1000.0) is BudgetStatus.WITHIN
    assert budget_status(1000.01, 0.0, 1000.0) is BudgetStatus.OVER
    assert budget_status(1000.0, 0.0, 1000.0) is BudgetStatus.WITHIN  # spent, not exceeded
    strict = StatusThresholds(likely_over=0.8, at_risk=0.3)
    assert budget_status(0.0, 0.5, 1000.0, strict) is BudgetStatus.AT_RISK
    assert [s.value for s in BudgetStatus] == ["over", "likely_over", "at_risk", "within"]
    with pytest.raises(PlanningError):
        StatusThresholds(likely_over=0.1, at_risk=0.5)
    with pytest.raises(PlanningError):
        month_to_date({"a": -1.0}, "a", forecast_bill([1.0], exactly(1)), 10.0)


def _at(hour: int) -> datetime:
    return datetime(2026, 11, 30, hour, tzinfo=UTC)


def test_retrainings_from_attempts() -> None:
    # r1: a failed attempt ($200, 09:00) then a success ($100, 15:00, quality 0.91):
    # cost $300, failed $200, start 09:00, quality 0.91. r2: one success ($120).
    # r3: cancelled only ($50): no quality, not succeeded, left out of the window.
    attempts = [
        Attempt("r1", Outcome.SUCCEEDED, 100.0, _at(15), 0.91),
        Attempt("r2", Outcome.SUCCEEDED, 120.0, _at(18), 0.90),
        Attempt("r1", Outcome.FAILED, 200.0, _at(9), None),
        Attempt("r3", "cancelled", 50.0, _at(20)),  # type: ignore[arg-type]
    ]
    r1, r2, r3 = group_retrainings(attempts)
    assert (r1.retraining_id, r1.attempts) == ("r1", 2)
    assert (r1.cost_usd, r1.failed_cost_usd) == (300.0, 200.0)
    assert r1.started_at == _at(9) and r1.quality == 0.91 and r1.succeeded
    assert (r2.cost_usd, r2.quality) == (120.0, 0.90)
    assert r3.quality is None and not r3.succeeded
    assert r3.cost_usd == 50.0  # paid in full, whatever the outcome
    assert [r.retraining_id for r in recent_window([r3, r2, r1], size=1)] == ["r2"]
    assert [r.retraining_id for r in recent_window([r3, r2, r1])] == ["r1", "r2"]
    with pytest.raises(PlanningError, match="outcome must be one of"):
        Attempt("x", "exploded", 1.0, _at(1))  # type: ignore[arg-type]
    with pytest.raises(PlanningError, match="cost"):
        Attempt("x", Outcome.FAILED, -1.0, _at(1))
