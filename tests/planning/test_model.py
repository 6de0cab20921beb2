"""RunFacts validation and the effective-worker conversion."""

from __future__ import annotations

import pytest

from app.planning.model import Interruption, PlanningError, RunFacts, effective_workers
from tests.fixtures.planning import make_run_facts


def test_effective_workers_equals_workers_when_g_is_w_times_t() -> None:
    # 112 GPU-h / 14 h = 8 workers
    assert effective_workers(make_run_facts()) == pytest.approx(8.0)


def test_effective_workers_when_workers_changed_mid_run() -> None:
    # 8 workers for 10 h then 4 workers for 4 h: G = 80 + 16 = 96; Weff = 96 / 14 = 6.857
    run = make_run_facts(gpu_hours=96.0)
    assert run.effective_workers == pytest.approx(96 / 14)


def test_interruption_sums_and_cost() -> None:
    run = make_run_facts(
        interruptions=(Interruption(0.5, 0.25, 1.0), Interruption(1.5, 0.25, 0.0)),
    )
    assert run.lost_progress_hours == pytest.approx(2.0)
    assert run.resume_hours == pytest.approx(0.5)
    assert run.reschedule_hours == pytest.approx(1.0)
    assert Interruption(0.5, 0.25, 1.0).total_hours == pytest.approx(1.75)
    assert run.cost_usd == pytest.approx(224.0)  # 112 GPU-h x $2


@pytest.mark.parametrize(
    "overrides",
    [
        {"workers": 0},
        {"wall_clock_hours": 0.0, "gpu_hours": 1.0},
        {"gpu_hours": 0.0},
        {"gpu_utilization": 1.2},
        {"gpu_utilization": -0.1},
        {"price_per_gpu_hour": -1.0},
        {"data_stall_hours": -1.0},
        {"checkpoint_hours": float("nan")},
        {"scheduling_wait_hours": -0.5},
        {"mfu": 1.5},
        {"quality_value": float("inf")},
    ],
)
def test_impossible_runs_are_rejected(overrides: dict[str, float]) -> None:
    with pytest.raises(PlanningError):
        make_run_facts(**overrides)


def test_negative_interruption_rejected_and_planning_error_is_value_error() -> None:
    with pytest.raises(ValueError):
        Interruption(-1.0, 0.0, 0.0)
    assert issubclass(PlanningError, ValueError)
    assert RunFacts(1, 1.0, 1.0, 0.5, 1.0).interruptions == ()
