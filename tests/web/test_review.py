"""The weekly review's pure functions: the default week, lines, totals, export (the sums
and the trend come from analytics.org_weeks: tests/analytics/test_org_caches.py)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import date, timedelta

from app.planning.goodput import GoodputTotals
from app.planning.weekly import WeekSummary, WeekTotals, fill_weeks, last_complete_week
from app.review.lines import (
    MonthSpend,
    PipelineInfo,
    ReviewLine,
    export_row,
    lines_of,
    total_of,
    week_in_one_line,
)
from app.templating import signed_usd

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


Data = Mapping[str, list[WeekTotals]]  # a pipeline's weeks (at most one row each)


def weeks(rows: list[WeekTotals]) -> tuple[WeekSummary, WeekSummary]:
    """(week before, week), as analytics.org_weeks gives them to the review."""
    before, this = fill_weeks(rows, PREV, MON)
    return before, this


def review_lines(
    pipelines: list[PipelineInfo], data: Data, months: Mapping[str, MonthSpend] | None = None
) -> list[ReviewLine]:
    return lines_of(pipelines, {p.name: weeks(data.get(p.name, [])) for p in pipelines}, months)


def summed(rows: Iterable[WeekTotals], monday: date) -> list[WeekTotals]:
    """Several pipelines' rows of one week added up (what OrgWindow.together does)."""
    mine = [r for r in rows if r.week_start == monday]
    if not mine:
        return []
    g = mine[0].goodput
    for r in mine[1:]:
        g = g + r.goodput
    hours = {c: sum(r.gpu_hours_by_cause[c] for r in mine) for c in mine[0].gpu_hours_by_cause}
    usd = {c: sum(r.usd_by_cause[c] for r in mine) for c in mine[0].usd_by_cause}
    return [WeekTotals(monday, g, sum(r.cost_usd for r in mine), hours, usd)]


def totals_line(
    data: Data,
    months: Mapping[str, MonthSpend] | None = None,
    budgets: Mapping[str, float] | None = None,
) -> ReviewLine:
    rows = [r for name in data for r in data[name]]
    before, this = weeks(summed(rows, PREV) + summed(rows, MON))
    spends = [(months or {}).get(n, MonthSpend()) for n in data]
    return total_of(before, this, spends, [(budgets or {}).get(n) for n in data])


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
    lines = review_lines([info("small"), info("big", 400.0), info("idle")], data)
    assert [ln.pipeline.name for ln in lines if ln.pipeline] == ["big", "small", "idle"]
    big = lines[0]
    # badput $ = 50 stall + 2 other idle = 52; the other causes are kept at 0.
    assert big.badput_usd == 52.0
    assert set(big.this.usd_by_cause) >= {"data_stall", "checkpoint", "failure", "other_idle"}
    assert big.spend_change_usd == 20.0  # 120 - 100
    # Without the month's figure there is nothing to compare with the budget.
    assert big.over_budget_usd is None and lines[2].this.goodput.overall is None
    # The budget compares the month's own figure (the one its word is about), never
    # the typical month's expected bill: this month $460 expected against $400 = +$60,
    # though a typical month's expected bill is $520.
    months = {"big": MonthSpend(300.0, 520.0, "likely_over", 460.0, 0.7)}
    big = review_lines([info("big", 400.0)], data, months)[0]
    assert big.over_budget_usd == 60.0


def test_totals_are_sums_and_goodput_is_gpu_hour_weighted() -> None:
    data = {"a": [totals(MON, 1, 10, 40, 4)], "b": [totals(MON, 3, 30, 120, 6)]}
    months = {
        "a": MonthSpend(100.0, None, "within", 300.0, 0.0),
        "b": MonthSpend(50.0, 900.0, None, None, None),
    }
    total = totals_line(data, months, {"a": 400.0})
    # sums: month to date 100 + 50; typical months 900 ("a" has none); the budget
    # compared is a's $400 against a's month $300 ("b" has no budget: apart)
    assert total.month == MonthSpend(150.0, 900.0, None, 300.0, None)
    assert total.monthly_budget_usd == 400.0 and total.over_budget_usd == -100.0
    assert total.this.runs == 4 and total.this.cost_usd == 160.0
    assert total.this.usd_by_cause["data_stall"] == 10.0
    # program share 0.5 on both: (5 + 15) / (10 + 30) = 0.5
    assert total.this.goodput.program == 0.5
    assert total.goodput_change_points is None  # no runs the week before


def test_export_row_has_every_field_in_plain_numbers() -> None:
    data = {"a": [totals(PREV, 1, 10, 30, 1), totals(MON, 2, 20, 80.456, 7)]}
    line = review_lines([info("a", 1000.0)], data)[0]
    row = export_row(line, MON)
    assert row["week"] == "2026-W48" and row["pipeline"] == "a" and row["owner"] == "team-a"
    assert row["spend_usd"] == 80.46 and row["spend_change_usd"] == 50.46
    assert row["data_stall_usd"] == 7.0 and row["other_idle_gpu_hours"] == 1.0
    assert row["badput_usd"] == 9.0
    assert row["goodput"] == 0.5 and row["goodput_change_points"] == 0.0
    total = export_row(totals_line(data), MON)
    assert total["pipeline"] == "TOTAL" and total["monthly_budget_usd"] is None


def test_signed_usd() -> None:
    assert signed_usd(12.4) == "+$12"
    assert signed_usd(-1234.0) == "−$1,234"
    assert signed_usd(0.2) == "$0"
    assert signed_usd(None) == "–"


def test_the_week_in_one_line() -> None:
    # Week before: 1 run, $30, goodput 0.5, badput $1 + $2 = $3; this week: 2 runs, $80,
    # goodput 0.5 (+0.0 points), badput $7 stall + $2 other idle = $9; spend +$50.
    data = {"a": [totals(PREV, 1, 10, 30, 1), totals(MON, 2, 20, 80, 7)]}
    [line] = review_lines([info("a")], data)
    assert week_in_one_line(line, "2026-W47") == (
        "2 runs cost $80 (+$50 on 2026-W47); goodput 50.0% (+0.0 points); "
        "$9 paid for GPU time that did no training."
    )
    # No runs the week before: no change is claimed.
    [first] = review_lines([info("a")], {"a": [totals(MON, 2, 20, 80, 7)]})
    assert week_in_one_line(first, "2026-W47").startswith("2 runs cost $80; goodput 50.0%;")


def test_the_budget_cell_is_the_month_the_week_ends_in_or_this_month() -> None:
    from datetime import date

    from app.review.lines import review_month

    monday = date(2026, 11, 30)  # the week of 30 November to 6 December
    assert review_month(monday, date(2026, 12, 1)) == date(2026, 12, 1)  # in progress
    assert review_month(monday, date(2026, 11, 30)) == date(2026, 11, 1)  # December not begun
    assert review_month(monday, date(2026, 12, 20)) == date(2026, 12, 1)  # ended in December
    assert review_month(date(2026, 11, 23), date(2026, 12, 1)) == date(2026, 11, 1)
