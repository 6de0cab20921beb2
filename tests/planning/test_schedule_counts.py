"""The vectorised retrainings-still-to-start count (methodology.md §5.4) equals the
scalar one, schedule by schedule: the org-wide month to date uses the first, the pipeline
page the second, and both must give the same status word."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.planning.model import PlanningError
from app.planning.schedule import epoch_microseconds, remaining_counts, remaining_runs

NEWEST = datetime(2026, 11, 28, tzinfo=UTC)  # a Saturday, 00:00 UTC
NOW = datetime(2026, 12, 16, 9, tzinfo=UTC)


def counts(newest: list[datetime], per_week: list[float], now: datetime) -> list[int]:
    stamps = np.array([epoch_microseconds(t) for t in newest], dtype=np.int64)
    return remaining_counts(stamps, np.array(per_week, dtype=float), now).tolist()


def test_worked_example() -> None:
    # 2 runs/week after Sat Nov 28 00:00, now Dec 16 09:00: Dec 19, 22 12:00, 26 and
    # 29 12:00 remain: 4. Once a week: Dec 19 and 26: 2. Paused (0/week): none.
    # Newest Dec 15 09:00 weekly: Dec 22 and 29 09:00: 2; a start exactly at now
    # (newest Dec 9 09:00, weekly: Dec 16 09:00) counts, as the scalar one does.
    newest = [NEWEST, NEWEST, NEWEST, NOW - timedelta(days=1), NOW - timedelta(days=7)]
    assert counts(newest, [2, 1, 0, 1, 1], NOW) == [4, 2, 0, 2, 3]
    assert remaining_runs(NOW - timedelta(days=7), 1, NOW).counts == (3,)


def test_epoch_microseconds_is_exact() -> None:
    # 1970-01-02 00:00:00.000001 UTC is 86,400 s and 1 us after the epoch.
    assert epoch_microseconds(datetime(1970, 1, 2, 0, 0, 0, 1, tzinfo=UTC)) == 86_400_000_001
    assert epoch_microseconds(datetime(1970, 1, 2)) == 86_400_000_000  # naive: UTC


def test_refuses_a_bad_cadence() -> None:
    with pytest.raises(PlanningError, match="runs per week"):
        counts([NEWEST], [-1.0], NOW)
    with pytest.raises(PlanningError, match="runs per week"):
        counts([NEWEST], [float("nan")], NOW)


moments = st.datetimes(
    min_value=datetime(2020, 1, 1), max_value=datetime(2032, 12, 31), timezones=st.just(UTC)
)
cadences = st.one_of(
    st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.0, 7.0, 14.0]),
    st.floats(min_value=0.01, max_value=50.0, allow_nan=False),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(moments, cadences), min_size=1, max_size=8), moments)
def test_equals_the_scalar_count(schedules: list[tuple[datetime, float]], now: datetime) -> None:
    newest = [t for t, _ in schedules]
    per_week = [k for _, k in schedules]
    expected = [remaining_runs(t, k, now).counts[0] for t, k in schedules]
    assert counts(newest, per_week, now) == expected
