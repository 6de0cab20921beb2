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
