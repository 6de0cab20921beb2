"""The dry-run table's totals (app/planning/imports.py)."""

from __future__ import annotations

import pytest

from app.planning.imports import Attempt, totals


def test_attempts_of_one_retraining_are_summed() -> None:
    rows = totals(
        [
            Attempt("ranker", "r-1", "preempted", 1, 1.5, has_utilization=False),
            Attempt("ranker", "r-1", "succeeded", 8, 14.0, has_utilization=True),
            Attempt("vision", "v-1", "failed", 2, 0.25, has_utilization=False),
        ]
    )
    ranker = rows["ranker"]
    # 1 x 1.5 + 8 x 14 = 113.5 GPU-hours; one retraining of two attempts.
    assert ranker.gpu_hours == pytest.approx(113.5)
    assert (ranker.attempts, len(ranker.retrainings), ranker.without_utilization) == (2, 1, 1)
    assert ranker.by_outcome == {"succeeded": 1, "failed": 0, "preempted": 1, "cancelled": 0}
    assert rows["vision"].gpu_hours == pytest.approx(0.5)  # 2 x 0.25
