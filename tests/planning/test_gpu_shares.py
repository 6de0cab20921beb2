"""GPU shares and Kueue admissions (app/planning/gpu_shares.py)."""

from __future__ import annotations

from datetime import UTC, datetime
from fractions import Fraction

import pytest

from app.planning.gpu_shares import ShareError, admissions, count_gpus, gpu_fraction

T0 = datetime(2026, 11, 10, tzinfo=UTC)


def at(hours: float) -> datetime:
    return datetime.fromtimestamp(T0.timestamp() + hours * 3600, tz=UTC)


def test_fractions_of_one_gpu() -> None:
    assert gpu_fraction("nvidia.com/gpu") == gpu_fraction("amd.com/gpu") == 1
    assert gpu_fraction("nvidia.com/mig-1g.10gb") == Fraction(1, 7)  # A100-80GB: 7 slices
    assert gpu_fraction("nvidia.com/mig-3g.40gb") == Fraction(3, 7)
    assert gpu_fraction("nvidia.com/mig-1g.6gb") == Fraction(1, 4)  # A30: 4 slices
    assert gpu_fraction("nvidia.com/gpu.shared", shares_per_gpu=4) == Fraction(1, 4)
    assert gpu_fraction("cpu") is None
    with pytest.raises(ShareError, match="not in the table"):
        gpu_fraction("nvidia.com/mig-5g.50gb")
    with pytest.raises(ShareError, match="--shares-per-gpu"):
        gpu_fraction("nvidia.com/gpu.shared")


def test_count_gpus_mixes_whole_and_slices() -> None:
    # 8 whole + 2 slices of 3/7 = 8 + 6/7 GPUs on 10 devices.
    found = count_gpus({"nvidia.com/gpu": 8, "nvidia.com/mig-3g.40gb": 2, "cpu": 64})
    assert (found.devices, found.whole) == (10, 8 + Fraction(6, 7))
    assert found.share == "2 x mig-3g.40gb = 3/7 GPU each"
    assert count_gpus({"nvidia.com/gpu": 4}).share == ""


def test_one_preemption_is_two_attempts_and_one_hour_of_wait() -> None:
    # created 0, last admitted 3 h, finished 5 h, 2 h ran before: 3 - 2 = 1 h waiting,
    # 0.5 h before each admission: [0.5, 2.5] evicted, then [3, 5].
    found = admissions(T0, at(3), at(5), 7200, 1)
    assert [(a.started, a.finished, a.evicted) for a in found] == [
        (at(0.5), at(2.5), True),
        (at(3), at(5), False),
    ]
    assert sum(a.wait_hours for a in found) == pytest.approx(1.0)


def test_two_preemptions_share_the_past_hours() -> None:
    # last admitted at 7 h after 4 h running over 2 evictions: 3 h wait, 1 h per admission;
    # each earlier admission ran 2 h: [1, 3], [4, 6], then [7, 8].
    found = admissions(T0, at(7), at(8), 4 * 3600, 2)
    assert [(a.started, a.finished) for a in found] == [
        (at(1), at(3)),
        (at(4), at(6)),
        (at(7), at(8)),
    ]
    assert [a.wait_hours for a in found] == pytest.approx([1.0, 1.0, 1.0])


def test_without_evictions_one_admission() -> None:
    [only] = admissions(T0, at(0.5), at(2), 0, 0)
    assert (only.started, only.wait_hours, only.evicted) == (at(0.5), 0.5, False)
    # More past seconds than time before the last admission: never more than there was.
    first, _last = admissions(T0, at(1), at(2), 7200, 1)
    assert (first.started, first.finished) == (T0, at(1))
