"""Run cost and the badput breakdown (methodology.md §1-2)."""

from __future__ import annotations

from dataclasses import asdict

import pytest
from hypothesis import given

from app.planning.economics import Badput, badput, badput_usd
from app.planning.model import Interruption, PlanningError, RunFacts
from tests.fixtures.planning import PROPERTY, make_run_facts, run_cost, runs


def test_run_cost() -> None:
    # 112 GPU-h x $2.50 = $280
    assert run_cost(112.0, 2.5) == pytest.approx(280.0)
    with pytest.raises(PlanningError):
        run_cost(-1.0, 2.0)


def test_worked_example_idle_gpu_hours() -> None:
    # 8 x 14 = 112 GPU-h; idle = (1 - 0.38) x 112 = 69.44; productive = 0.38 x 112 = 42.56
    b = badput(make_run_facts())
    assert b.total == pytest.approx(112.0)
    assert b.idle == pytest.approx(69.44)
    assert b.productive == pytest.approx(42.56)
    assert b.other_idle == pytest.approx(69.44)  # no named causes recorded
    assert not b.overexplained


def test_named_causes_in_gpu_hours() -> None:
    # Weff = 8. stall 4 h -> 32; checkpoint 1 h -> 8; failure (0.5 + 0.25 + 0.25) h -> 8.
    # other idle = 69.44 - 48 = 21.44
    run = make_run_facts(
        data_stall_hours=4.0,
        checkpoint_hours=1.0,
        interruptions=(Interruption(0.5, 0.25, 0.25),),
    )
    b = badput(run)
    assert (b.data_stall, b.checkpoint, b.failure) == pytest.approx((32.0, 8.0, 8.0))
    assert b.named == pytest.approx(48.0)
    assert b.other_idle == pytest.approx(21.44)


def test_uses_effective_workers_when_g_below_w_times_t() -> None:
    # G = 70, T = 14 -> Weff = 5; a 2 h stall is 10 GPU-h, not 16.
    b = badput(make_run_facts(gpu_hours=70.0, data_stall_hours=2.0))
    assert b.data_stall == pytest.approx(10.0)


def test_overexplained_causes_are_scaled_to_idle() -> None:
    # u = 0.9: idle = 0.1 x 112 = 11.2. stall 2 h -> 16, checkpoint 1 h -> 8: named 24 > 11.2.
    # factor 11.2 / 24 = 0.4667: stall 7.4667, checkpoint 3.7333, other 0.
    b = badput(make_run_facts(gpu_utilization=0.9, data_stall_hours=2.0, checkpoint_hours=1.0))
    assert b.overexplained
    assert b.data_stall == pytest.approx(16 * 11.2 / 24)
    assert b.checkpoint == pytest.approx(8 * 11.2 / 24)
    assert b.other_idle == 0.0
    assert b.named == pytest.approx(11.2)


def test_usd_breakdown_and_its_fields() -> None:
    # at $2.50: idle 69.44 x 2.5 = 173.6; productive 42.56 x 2.5 = 106.4
    b = badput(make_run_facts()).usd(2.5)
    assert b.unit == "usd"
    assert b.idle == pytest.approx(173.6)
    assert b.productive == pytest.approx(106.4)
    d = asdict(b)
    assert d["unit"] == "usd" and d["other_idle"] == pytest.approx(173.6)
    assert set(d) >= {"productive", "idle", "data_stall", "checkpoint", "failure", "other_idle"}
    with pytest.raises(PlanningError):
        badput_usd(b, 2.0)  # already USD
    with pytest.raises(PlanningError):
        badput_usd(Badput(1, 1, 0, 0, 0, 1), -1.0)


@PROPERTY
@given(runs())
def test_badput_parts_never_exceed_idle_and_are_non_negative(run: RunFacts) -> None:
    b = badput(run)
    parts = (b.data_stall, b.checkpoint, b.failure, b.other_idle)
    assert all(p >= 0 for p in parts)
    assert sum(parts) <= b.idle * (1 + 1e-9) + 1e-9
    assert b.productive + b.idle == pytest.approx(run.gpu_hours)
    if not b.overexplained:
        assert sum(parts) == pytest.approx(b.idle, rel=1e-9, abs=1e-9)
