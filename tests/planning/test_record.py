"""The forecast record's arithmetic (app/planning/record.py, app/planning/backtest.py):
scoring a closed month, adding a record up, pooling records, the sentences, and the window
a backtest draws from. Every expected value is worked by hand in a comment."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest

from app.planning.backtest import (
    RecordRun,
    month_spend,
    newest_start_before,
)
from app.planning.record import (
    MonthForecast,
    RecordSummary,
    org_sentence,
    pooled,
    record_sentence,
    score,
    summarise,
)
from tests.fixtures.forecast_record import window_before

NOV = date(2026, 11, 1)
AT = datetime(2026, 11, 1, tzinfo=UTC)


def forecast(
    expected: float = 1400.0, lo: float = 1200.0, hi: float = 1650.0, **kw: object
) -> MonthForecast:
    fields: dict[str, object] = {
        "month": NOV, "forecast_at": AT, "expected_bill_usd": expected, "bill_p10_usd": lo,
        "bill_p90_usd": hi, "p_over_budget": 0.2, "budget_usd": 1500.0, "status": "at_risk",
        "source": "recorded",
    }  # fmt: skip
    fields.update(kw)
    return MonthForecast(**fields)  # type: ignore[arg-type]


def test_a_month_over_its_p90() -> None:
    # Expected $1,400, band $1,200-$1,650, budget $1,500, "at_risk"; the month cost $1,700:
    # 1,700 > 1,650: p90 exceeded, outside the band; error (1,400 - 1,700) / 1,700 =
    # -17.647%; 1,700 > 1,500: over budget, which "at_risk" said it would not be: wrong.
    m = score(forecast(), 1700.0)
    assert m.p90_exceeded and not m.inside_band
    assert m.error_pct == pytest.approx(-17.647, abs=1e-3)
    assert m.budget_exceeded is True and m.status_right is False


def test_a_month_inside_its_band() -> None:
    # $1,300 in [1,200, 1,650]: inside, not exceeded; error (1,400 - 1,300) / 1,300 =
    # +7.692%; within the $1,500 budget, as "at_risk" (< 50%) said: right.
    m = score(forecast(), 1300.0)
    assert m.inside_band and not m.p90_exceeded
    assert m.error_pct == pytest.approx(7.692, abs=1e-3)
    assert m.budget_exceeded is False and m.status_right is True
    # The band's edges are inside it; "likely_over" for a month that went over is right.
    assert score(forecast(), 1650.0).inside_band and score(forecast(), 1200.0).inside_band
    assert score(forecast(status="likely_over"), 1600.0).status_right is True


def test_no_budget_and_no_bill() -> None:
    # Without a budget there is no verdict to score; a month that cost $0 has no error.
    m = score(forecast(budget_usd=None, status=None, p_over_budget=None), 0.0)
    assert m.budget_exceeded is None and m.status_right is None and m.error_pct is None
    assert not m.inside_band and not m.p90_exceeded  # 0 < p10 1,200


def test_summarise() -> None:
    # Three months:
    #   a: expected 110, band 90-120, bill 100: inside, error (110-100)/100 = +10%
    #   b: expected 96,  band 80-95,  bill 100: p90 exceeded, error (96-100)/100 = -4%
    #   c: expected 50,  band 0-60,   bill 0:   inside (0 <= 0 <= 60), no error
    # months 3, exceeded 1, inside 2, mean |error| (10 + 4) / 2 = 7% over 2 months.
    months = [
        score(forecast(110.0, 90.0, 120.0, budget_usd=None, status=None), 100.0),
        score(forecast(96.0, 80.0, 95.0, budget_usd=None, status=None), 100.0),
        score(forecast(50.0, 0.0, 60.0, budget_usd=None, status=None), 0.0),
    ]
    s = summarise(months)
    assert (s.months, s.p90_exceeded, s.inside_band, s.error_months) == (3, 1, 2, 2)
    assert s.mean_abs_error_pct == pytest.approx(7.0)
    assert s.budgeted_months == 0 and s.status_right == 0


def test_pooled_weights_the_error_by_months() -> None:
    # (12 months, 1 exceeded, 10 inside, 6% over 12) + (8, 2, 5, 11% over 8):
    # 20 months, 3 exceeded, 15 inside, mean (6 x 12 + 11 x 8) / 20 = 160 / 20 = 8%.
    a = RecordSummary(12, 1, 10, 6.0, 12, 12, 11)
    b = RecordSummary(8, 2, 5, 11.0, 8, 0, 0)
    p = pooled([a, b])
    assert (p.months, p.p90_exceeded, p.inside_band, p.error_months) == (20, 3, 15, 20)
    assert p.mean_abs_error_pct == pytest.approx(8.0)
    assert (p.budgeted_months, p.status_right) == (12, 11)
    assert pooled([]).mean_abs_error_pct is None and pooled([]).months == 0


def test_the_sentences() -> None:
    s = RecordSummary(12, 1, 10, 6.2, 12, 12, 11)
    assert record_sentence(s) == (
        "The p90 was exceeded in 1 of the last 12 months; 10 of 12 bills fell inside the "
        "forecast band; mean error 6%."
    )
    one = RecordSummary(1, 0, 1, 3.0, 1, 0, 0)
    assert record_sentence(one).startswith(
        "The p90 was exceeded in 0 of the last month; 1 of 1 bill"
    )
    assert record_sentence(RecordSummary(0, 0, 0, None, 0, 0, 0)).startswith("No month has closed")
    # 22 of 240 = 9.17% -> "9%"; 190 of 240 = 79.2% -> "79%".
    org = RecordSummary(240, 22, 190, 8.0, 240, 200, 180)
    assert org_sentence(org) == (
        "The p90 was exceeded in 9% of 240 pipeline-months; 79% of the bills fell inside "
        "the forecast band."
    )


def run(day: int, usd: float, *, rid: str, ok: bool = True, variant: str = "baseline") -> RecordRun:
    # 8 workers x 10 h at $1/GPU-h with G = usd: below the cap 8 x 10 x 1.01 = 80.8 for
    # usd <= 80.8, so the window cost is usd exactly.
    started = AT + timedelta(days=day)
    return RecordRun(started, variant, rid, ok, ok, 8, 10.0, usd, 1.0, 2.0)


def test_window_before_counts_only_what_had_started() -> None:
    # a: $70 day 1; b: failed $40 day 8 (retraining r2); c: $60 day 8 + 1 h (r2);
    # d: $50 day 15; e: $30 day 9, another variant.
    runs = sorted(
        [run(1, 70, rid="r1"), run(8, 40, rid="r2", ok=False), run(15, 50, rid="r4"),
         run(9, 30, rid="r3", variant="candidate")],
        key=lambda r: r.started_at,
    )  # fmt: skip
    c = RecordRun(
        AT + timedelta(days=8, hours=1), "baseline", "r2", True, True, 8, 10.0, 60, 1.0, 2.0
    )
    runs = sorted([*runs, c], key=lambda r: r.started_at)
    # Before day 10: a ($70) and c ($60 + b's $40 = $100); the candidate's run is not in it.
    assert window_before(runs, "baseline", AT + timedelta(days=10), 20) == (70.0, 100.0)
    # Before day 20, the newest 2: c ($100) and d ($50).
    assert window_before(runs, "baseline", AT + timedelta(days=20), 2) == (100.0, 50.0)
    # Before day 8 + 30 min: b has started, c not: a alone (a failed attempt stands in no window).
    assert window_before(runs, "baseline", AT + timedelta(days=8, minutes=30), 20) == (70.0,)
    assert newest_start_before(runs, "baseline", AT + timedelta(days=10)) == c.started_at
    assert newest_start_before(runs, "baseline", AT) is None
    # The cap: G = 100 above 8 x 10 x 1.01 = 80.8 GPU-h counts 80.8 x $1.
    assert run(1, 100, rid="x").window_usd == pytest.approx(80.8)


def test_month_spend_is_every_attempt_at_its_frozen_price() -> None:
    # $2/GPU-h frozen: Oct 31 23:00 UTC, G 50 -> $100; Nov: G 25 + 12.5 -> $50 + $25 = $75
    # (the failed attempt and the other variant count too).
    oct31 = RecordRun(AT - timedelta(hours=1), "baseline", "a", True, True, 8, 10.0, 50, 1.0, 2.0)
    runs = [oct31, run(2, 25, rid="b", ok=False), run(3, 12.5, rid="c", variant="candidate")]
    assert month_spend(runs) == {date(2026, 10, 1): 100.0, NOV: 75.0}
