from __future__ import annotations

from datetime import date

import pytest

from app.planning.goodput import GoodputTotals
from app.planning.weekly import WeekTotals, fill_weeks, iso_week, week_monday


def test_iso_week_labels() -> None:
    assert iso_week(date(2026, 11, 2)) == "2026-W45"  # a Monday
    assert iso_week(date(2026, 11, 8)) == "2026-W45"  # the Sunday after
    assert iso_week(date(2021, 1, 3)) == "2020-W53"  # ISO years differ from calendar years
    assert week_monday("2026-W45") == date(2026, 11, 2)
    with pytest.raises(ValueError, match="ISO week"):
        week_monday("2026-45")


def test_fill_weeks_inserts_empty_weeks() -> None:
    # One run of 112 GPU-h in W45 and none in W46: W46 is present with zero totals.
    t = GoodputTotals(1, 112.0, 120.0, 8.0, 112.0, 10.0, 42.56, 0.0)
    rows = fill_weeks(
        [WeekTotals(date(2026, 11, 2), t, 280.0)], date(2026, 11, 4), date(2026, 11, 12)
    )
    assert [r.week for r in rows] == ["2026-W45", "2026-W46"]
    assert rows[0].cost_usd == 280.0
    # scheduling = (120 - 8) / 120 = 0.9333; runtime = (112 - 10) / 112 = 0.9107;
    # program = program GPU-h / forward-progress GPU-h (held - runtime loss)
    #         = 42.56 / (112 - 10) = 0.41725
    assert rows[0].goodput.scheduling == pytest.approx(0.93333, rel=1e-4)
    assert rows[0].goodput.runtime == pytest.approx(0.91071, rel=1e-4)
    assert rows[0].goodput.program == pytest.approx(42.56 / 102)
    assert rows[1].runs == 0
    assert rows[1].goodput.overall is None
