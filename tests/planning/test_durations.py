"""One formatter for every duration shown (issue 35 item 7: never "4.43e-09 h")."""

from __future__ import annotations

import math

import pytest

from app.planning.durations import duration


@pytest.mark.parametrize(
    ("hours", "words"),
    [
        (0.0, "0 s"),
        (4.43e-09, "under 1 s"),  # 16 microseconds: what the checkpoint note printed in h
        (0.01, "36 s"),  # 0.01 h x 3600 = 36 s
        (59.4 / 3600, "59 s"),
        (5 / 60, "5 min"),  # 0.0833 h
        (0.04, "2.4 min"),  # 0.04 x 60 = 2.4 min
        (0.5, "30 min"),
        (1.95, "1.95 h"),
        (14.0, "14 h"),
        (100.0, "4.2 days"),  # 100 / 24 = 4.17
        (24 * 366, "366 days"),
        (math.inf, "never"),
        (None, "–"),
        (-0.5, "-30 min"),
    ],
)
def test_duration_words(hours: float | None, words: str) -> None:
    assert duration(hours) == words


def test_a_cadence_past_what_a_week_holds_is_impossible() -> None:
    from app.planning.durations import week_capacity_warning
    from app.planning.projection import project_costs
    from tests.fixtures.planning import make_run_facts

    # 40 x 14 h = 560 h > 168 h; 12 x 14 = 168 h fits exactly; 2 x 14 = 28 h.
    assert week_capacity_warning(40, 14.0) == (
        "40 runs a week of 14 h each need 560 h, more than the 168 h a week has: "
        "impossible unless runs overlap"
    )
    assert week_capacity_warning(12, 14.0) is None
    assert week_capacity_warning(2, 14.0) is None
    # The projection says so for that cadence only (8 x 14 h runs).
    proj = project_costs([make_run_facts()] * 3, [2.0, 40.0])
    assert [w for w in proj.warnings if "impossible" in w] == [week_capacity_warning(40, 14.0)]
