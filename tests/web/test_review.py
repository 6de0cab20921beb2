"""The weekly review's pure functions: the default week, lines, totals, trend, export."""

from __future__ import annotations

from datetime import date, timedelta

from app.planning.goodput import GoodputTotals
from app.planning.weekly import WeekTotals, last_complete_week
from app.templating import signed_usd
from app.web.review_view import (
    TREND_WEEKS,
    MonthSpend,
    PipelineInfo,
    export_row,
    review_lines,
    totals_line,
    trend,
)

MON = date(2026, 11, 23)  # ISO week 2026-W48
PREV = MON - timedelta(weeks=1)


def totals(monday: date, runs: int, gpu_h: float, cost: float, stall_usd: float) -> WeekTotals:
    # Every GPU-hour is held and productive except the stalls: goodput = program share.
    g = GoodputTotals(runs, gpu_h, gpu_h, 0.0, gpu_h, 0.0, gpu_h * 0.5, 0.0)
    hours = {"data_stall": stall_usd / 2, "checkpoint": 0.0, "failure": 0.0, "other_idle": 1.0}
    usd = {"data_stall": stall_usd, "checkpoint": 0.0, "failure": 0.0, "other_idle": 2.0}
    return WeekTotals(monday, g, cost, hours, usd)


def info(name: str, budget: float | None = None) -> PipelineInfo:
    return PipelineInfo(name, name.title(), "team-a", budget)


def test_monday_morning_opens_on_the_week_that_ended() -> None:
    assert last_complete_week(date(2026, 11, 30)) == MON  # Monday of W49 -> W48
    assert last_complete_week(date(2026, 12, 6)) == MON  # Sunday of W49 -> still W48
    assert last_complete_week(date(2026, 12, 7)) == date(2026, 11, 30)


def test_lines_are_sorted_by_waste_in_dollars_and_every_cause_is_kept() -> None:
    data = {
        "small": [totals(MON, 1, 10, 40, 5)],
        "big": [totals(PREV, 2, 20, 100, 1), totals(MON, 3, 30, 120, 50)],
        "idle": [],
    }
    lines = review_lines([info("small"), info("big", 400.0), info("idle")], data, MON)
    assert [ln.pipeline.name for ln in lines if ln.pipeline] == ["big", "small", "idle"]
    big = lines[0]
    # badput $ = 50 stall + 2 other idle = 52; the other causes are kept at 0.
    assert big.badput_usd == 52.0
    assert set(big.this.usd_by_cause) >= {"data_stall", "checkpoint", "failure", "other_idle"}
    assert big.spend_change_usd == 20.0  # 120 - 100
    # Without a projection there is nothing to compare with the budget.
    assert big.over_budget_usd is None and lines[2].this.goodput.overall is None
    months = {"big": MonthSpend(300.0, 520.0)}
    big = review_lines([info("big", 400.0)], data, MON, months)[0]
    assert big.over_budget_usd == 120.0  # projected 520 against a 400 budget


def test_totals_are_sums_and_goodput_is_gpu_hour_weighted() -> None:
    data = {"a": [totals(MON, 1, 10, 40, 4)], "b": [totals(MON, 3, 30, 120, 6)]}
    months = {"a": MonthSpend(100.0, None), "b": MonthSpend(50.0, 900.0)}
    total = totals_line(data, data.keys(), MON, months)
    assert total.month == MonthSpend(150.0, 900.0)  # sums; "a" has no projection
    assert total.this.runs == 4 and total.this.cost_usd == 160.0
    assert total.this.usd_by_cause["data_stall"] == 10.0
    # program share 0.5 on both: (5 + 15) / (10 + 30) = 0.5
    assert total.this.goodput.program == 0.5
    assert total.goodput_change_points is None  # no runs the week before


def test_trend_has_twelve_weeks_ending_with_the_chosen_one() -> None:
    early = MON - timedelta(weeks=20)  # outside the window: not counted
    data = {
        "a": [totals(early, 9, 90, 900, 0), totals(PREV, 1, 10, 40, 0)],
        "b": [totals(PREV, 1, 10, 60, 0), totals(MON, 1, 10, 10, 0)],
    }
    weeks = trend(data, data.keys(), MON)
    assert len(weeks) == TREND_WEEKS
    assert weeks[-1].week == "2026-W48" and weeks[0].week == "2026-W37"
    assert [w.cost_usd for w in weeks[-2:]] == [100.0, 10.0]
    assert sum(w.runs for w in weeks) == 3


def test_export_row_has_every_field_in_plain_numbers() -> None:
    data = {"a": [totals(PREV, 1, 10, 30, 1), totals(MON, 2, 20, 80.456, 7)]}
    line = review_lines([info("a", 1000.0)], data, MON)[0]
    row = export_row(line, MON)
    assert row["week"] == "2026-W48" and row["pipeline"] == "a" and row["owner"] == "team-a"
    assert row["spend_usd"] == 80.46 and row["spend_change_usd"] == 50.46
    assert row["data_stall_usd"] == 7.0 and row["other_idle_gpu_hours"] == 1.0
    assert row["badput_usd"] == 9.0
    assert row["goodput"] == 0.5 and row["goodput_change_points"] == 0.0
    total = export_row(totals_line(data, ["a"], MON), MON)
    assert total["pipeline"] == "TOTAL" and total["monthly_budget_usd"] is None


def test_signed_usd() -> None:
    assert signed_usd(12.4) == "+$12"
    assert signed_usd(-1234.0) == "−$1,234"
    assert signed_usd(0.2) == "$0"
    assert signed_usd(None) == "–"
