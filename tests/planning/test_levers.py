"""Ranking the badput causes by monthly cost."""

from __future__ import annotations

import pytest

from app.planning.levers import rank_levers
from app.planning.model import Interruption, PlanningError
from tests.fixtures.planning import make_run_facts

# All 8 workers x 14 h, 38% (idle 69.44 GPU-h), $2/GPU-h. Per-run GPU-hours (x Weff = 8):
#   A: stall 4 h -> 32, checkpoint 1 h -> 8, failure 0, other 69.44 - 40 = 29.44, wait 2 h -> 16
#   B: stall 6 h -> 48, checkpoint 1 h -> 8, failure 0, other 13.44,               wait 0
#   C: stall 5 h -> 40, checkpoint 0.5 h -> 4, failure 1 h -> 8, other 17.44,       wait 4 h -> 32
# Means: stall 40, checkpoint 6.667, failure 2.667, other 20.107, wait 16 (2 h wall clock).
RUNS = [
    make_run_facts(data_stall_hours=4.0, checkpoint_hours=1.0, scheduling_wait_hours=2.0),
    make_run_facts(data_stall_hours=6.0, checkpoint_hours=1.0),
    make_run_facts(
        data_stall_hours=5.0,
        checkpoint_hours=0.5,
        scheduling_wait_hours=4.0,
        interruptions=(Interruption(0.5, 0.25, 0.25),),
    ),
]


def test_levers_ranked_by_monthly_cost_hand_worked() -> None:
    levers = rank_levers(RUNS, runs_per_month=4.0)
    assert [lv.cause for lv in levers] == [
        "data_stall",  # 40 x 4 = 160 GPU-h, $320
        "other_idle",  # 20.107 x 4 = 80.43 GPU-h, $160.85
        "checkpoint",  # 6.667 x 4 = 26.67 GPU-h, $53.33
        "failure",  # 2.667 x 4 = 10.67 GPU-h, $21.33 (a median would hide it: 0)
        "scheduling_wait",  # 16 x 4 = 64 GPU-h, not billed: $0
    ]
    stall, other, ckpt, failure, wait = levers
    assert stall.gpu_hours_per_month == pytest.approx(160.0)
    assert stall.usd_per_month == pytest.approx(320.0)
    assert (stall.saving_if_halved_usd, stall.saving_if_removed_usd) == pytest.approx((160, 320))
    assert "pre-shard" in stall.remedy.lower() and "prefetch" in stall.remedy
    assert other.usd_per_month == pytest.approx((29.44 + 13.44 + 17.44) / 3 * 4 * 2)
    assert "profile" in other.remedy.lower()
    assert ckpt.usd_per_month == pytest.approx(20 / 3 * 4 * 2) and "asynchronous" in ckpt.remedy
    assert not wait.billed and wait.usd_per_month == 0.0
    assert wait.gpu_hours_per_month == pytest.approx(64.0)
    assert wait.wall_clock_hours_per_month == pytest.approx(8.0)
    assert "reserv" in wait.remedy.lower() and "not billed" in wait.working
    assert failure.usd_per_month == pytest.approx(8 / 3 * 4 * 2)
    assert "preemption" in failure.remedy
    assert all(lv.cause != "workers" for lv in levers)  # median utilization 38% is low


def test_price_override() -> None:
    stall = rank_levers(RUNS, runs_per_month=4.0, price=3.0)[0]
    assert stall.usd_per_month == pytest.approx(480.0)  # 160 GPU-h x $3


def test_workers_lever_only_when_utilization_and_efficiency_high() -> None:
    busy = [make_run_facts(gpu_utilization=0.9)]
    assert rank_levers(busy, runs_per_month=4.0, efficiency=0.9)[-1].cause == "workers"
    assert all(lv.cause != "workers" for lv in rank_levers(busy, runs_per_month=4.0))
    low_eff = rank_levers(busy, runs_per_month=4.0, efficiency=0.5)
    assert all(lv.cause != "workers" for lv in low_eff)
    custom = rank_levers(
        RUNS,
        runs_per_month=4.0,
        utilization=0.5,
        efficiency=0.6,
        min_utilization_for_workers=0.4,
        min_efficiency_for_workers=0.5,
    )
    # The workers lever states the extra cost of scaling at efficiency 0.6: mean G 112 x
    # 4 runs x (1/0.6 - 1) = 298.67 GPU-h, x $2 = $597.33 a month, a negative saving.
    assert custom[-1].cause == "workers"
    assert custom[-1].gpu_hours_per_month == pytest.approx(112 * 4 * (1 / 0.6 - 1))
    assert custom[-1].usd_per_month == pytest.approx(597.3333, rel=1e-5)
    assert custom[-1].saving_if_removed_usd == pytest.approx(-597.3333, rel=1e-5)


def test_empty_runs_and_validation() -> None:
    levers = rank_levers([], runs_per_month=4.0)
    assert len(levers) == 5 and all(lv.usd_per_month == 0.0 for lv in levers)
    with pytest.raises(PlanningError):
        rank_levers(RUNS, runs_per_month=-1.0)


def test_failed_attempts_are_a_lever_less_the_progress_resumed() -> None:
    # Two retrainings of 8 workers x 14 h at $2/GPU-h (each succeeded run carries its
    # retraining's failed attempts):
    #   A: a failed attempt of 15 h = 120 GPU-h ($240); the run resumed 14 h of it:
    #      120 - 14 x 8 = 8 GPU-h of failed badput ($16).
    #   B: a failed attempt of 5 h = 40 GPU-h ($80), nothing resumed: 40 GPU-h ($80).
    # Mean (8 + 40) / 2 = 24 GPU-h x 4 runs/month = 96 GPU-h, $192/month.
    runs = [
        make_run_facts(
            failed_attempts_gpu_hours=120.0, failed_attempts_cost_usd=240.0, resumed_from_hours=14
        ),
        make_run_facts(failed_attempts_gpu_hours=40.0, failed_attempts_cost_usd=80.0),
    ]
    levers = {lv.cause: lv for lv in rank_levers(runs, runs_per_month=4.0)}
    failed = levers["failed"]
    assert failed.gpu_hours_per_month == pytest.approx(96.0)
    assert failed.usd_per_month == pytest.approx(192.0)
    assert failed.saving_if_halved_usd == pytest.approx(96.0) and failed.billed
    assert failed.label == "Failed attempts"
    assert "checkpoint more often" in failed.remedy.lower() and "fix the crash" in failed.remedy
    # At a scenario price of $3: 96 GPU-h x $3 = $288.
    at_3 = {lv.cause: lv for lv in rank_levers(runs, runs_per_month=4.0, price=3.0)}
    assert at_3["failed"].usd_per_month == pytest.approx(288.0)
    # Without failed attempts in the window there is no such line.
    assert "failed" not in {lv.cause for lv in rank_levers(RUNS, runs_per_month=4.0)}
