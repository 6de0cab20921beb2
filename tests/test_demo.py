"""Demo data never lies in the future: whatever day and hour it is loaded, every run
(and every evaluation) has finished before now, and the latest runs fall in the last
complete ISO week, the week the weekly review opens on."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from app.demo import fraud_runs, ranker_evaluations, ranker_runs, week_start
from app.demo_portfolio import PIPELINES as PORTFOLIO
from app.demo_portfolio import evaluations_of, runs_of
from app.planning.weekly import monday_of

# A Monday just after midnight (the worst case: the week has only just begun), each
# other weekday, and a Sunday just before midnight.
MOMENTS = [
    datetime(2026, 11, 30, 0, 0, 1, tzinfo=UTC),
    *(datetime(2026, 12, 1, 9, tzinfo=UTC) + timedelta(days=d) for d in range(5)),
    datetime(2026, 12, 6, 23, 59, 59, tzinfo=UTC),
]


@pytest.mark.parametrize("now", MOMENTS, ids=lambda m: m.strftime("%a-%H%M"))
def test_every_demo_run_and_evaluation_is_in_the_past(now: datetime) -> None:
    anchor = week_start(now)
    runs = ranker_runs(anchor) + fraud_runs(anchor)
    assert max(r.finished_at for r in runs) < now
    evaluations = ranker_evaluations(ranker_runs(anchor), now)
    assert evaluations and max(e.evaluated_at for e in evaluations) <= now
    # The latest runs are in the last complete week: the Monday before this week's.
    last_complete = monday_of(now) - timedelta(weeks=1)
    assert monday_of(max(r.started_at for r in runs)) == last_complete
    # and both pipelines have runs in it, so the review's default week is not empty.
    in_week = {r.pipeline for r in runs if monday_of(r.started_at) == last_complete}
    assert in_week == {"recsys-ranker", "fraud-detector"}


def test_the_anchor_is_the_monday_of_the_last_complete_week() -> None:
    # Wednesday 2026-12-02: this week began Monday 2026-11-30; the last complete week
    # began Monday 2026-11-23.
    assert week_start(datetime(2026, 12, 2, 12, tzinfo=UTC)) == datetime(2026, 11, 23, tzinfo=UTC)


@pytest.mark.parametrize("now", MOMENTS, ids=lambda m: m.strftime("%a-%H%M"))
def test_the_plans_demo_pipelines_are_in_the_past_too(now: datetime) -> None:
    anchor = week_start(now)
    last_complete = monday_of(now) - timedelta(weeks=1)
    with_curves = 0
    for name in PORTFOLIO:
        runs = runs_of(name, anchor)
        assert max(r.finished_at for r in runs) < now
        assert monday_of(max(r.started_at for r in runs)) == last_complete
        found = evaluations_of(name, runs, now)
        assert all(e.evaluated_at <= now for e in found)
        with_curves += bool(found)
    # Six pipelines with app/demo.py's two, three with evaluations (the ranker's too).
    assert len(PORTFOLIO) + 2 >= 6 and with_curves + 1 >= 3
