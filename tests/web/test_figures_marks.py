"""Where a change point is drawn on the charts (app/web/figures_marks.py)."""

from __future__ import annotations

from datetime import UTC, date, datetime

from app.web.figures_marks import Mark, on_weeks, run_position, week_position, with_marks


def _at(day: int, hour: int = 0) -> datetime:
    return datetime(2026, 10, day, hour, tzinfo=UTC)


def test_between_runs() -> None:
    starts = [_at(1, 8), _at(8, 8), _at(15, 8), _at(22, 8)]
    # Oct 12 falls after the 2nd run (index 1) and before the 3rd (index 2): x = 1.5.
    assert run_position(starts, _at(12)) == 1.5
    assert run_position(starts, _at(30)) == 3.5  # after the newest run: the right edge
    assert run_position(starts, _at(1, 8)) == -0.5  # at the first run: before it
    assert run_position(starts, datetime(2026, 9, 1, tzinfo=UTC)) is None  # older than the chart
    assert run_position([], _at(12)) is None


def test_inside_its_week() -> None:
    mondays = [date(2026, 10, 5), date(2026, 10, 12)]
    # Week i spans i - 0.5 .. i + 0.5. Monday Oct 12 00:00 starts week 1: x = 0.5.
    assert week_position(mondays, _at(12)) == 0.5
    # Thursday Oct 15 12:00 is 3.5 of 7 days into week 1: 1 - 0.5 + 0.5 = 1.0.
    assert week_position(mondays, _at(15, 12)) == 1.0
    assert week_position(mondays, _at(19)) is None  # after the last week shown
    assert week_position(mondays, _at(4)) is None  # before the first


def test_marks_are_added_and_escaped_once() -> None:
    fig = {"data": [], "layout": {"annotations": [{"text": "kept"}]}}
    marked = with_marks(fig, [(1.5, Mark(_at(12), "<b>async</b> checkpoints"))])
    assert fig["layout"] == {"annotations": [{"text": "kept"}]}  # the input is unchanged
    notes = marked["layout"]["annotations"]
    assert [n["text"] for n in notes] == ["kept", "&lt;b&gt;async&lt;/b&gt; checkpoints"]
    assert marked["layout"]["shapes"][0]["x0"] == 1.5
    assert on_weeks(fig, [date(2026, 10, 5)], []) is fig  # nothing to mark: the same figure
