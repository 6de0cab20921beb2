"""Failure rates, checkpoint intervals and ETTR (methodology.md §4)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.planning.failures import (
    DEFAULT_FAILURE_RATE,
    CheckpointAdvice,
    checkpoint_advice,
    checkpoint_overhead_hours,
    cluster_mtbf_hours,
    daly_interval,
    estimate_failure_rate,
    ettr,
    expected_failures,
    expected_loss_per_failure,
    write_hours_per_checkpoint,
    young_interval,
)
from app.planning.model import PlanningError
from tests.fixtures.planning import PROPERTY

FIVE_MIN = 5 / 60


def hand_worked_advice(write_hours: float) -> CheckpointAdvice:
    """8 workers at lambda = 1/192 (M = 24 h), a checkpoint every 4 h, a 48 h run 4 times
    a month at $2 a GPU-hour, 0.25 h to resume; the write time is the test's."""
    return checkpoint_advice(
        write_hours=write_hours,
        current_interval_hours=4.0,
        workers=8,
        wall_clock_hours=48.0,
        runs_per_month=4.0,
        price_per_gpu_hour=2.0,
        failure_rate_per_instance_hour=1 / 192,
        resume_hours=0.25,
    )


def test_cluster_mtbf_domain_example() -> None:
    # 512 x 4e-4 = 0.2048 failures/h -> M = 1 / 0.2048 = 4.8828 h ("about every 4.9 h")
    assert DEFAULT_FAILURE_RATE == 4e-4
    assert cluster_mtbf_hours(512, 4e-4) == pytest.approx(4.8828125)
    assert cluster_mtbf_hours(8, 0.0) == math.inf
    with pytest.raises(PlanningError):
        cluster_mtbf_hours(0, 4e-4)


def test_expected_failures_and_loss() -> None:
    # 14 h / 4.8828 h = 2.8672 failures; loss per failure = 2/2 + 0.25 + 0.5 = 1.75 h
    assert expected_failures(14.0, 4.8828125) == pytest.approx(2.8672)
    assert expected_failures(14.0, math.inf) == 0.0
    assert expected_loss_per_failure(2.0, 0.25, 0.5) == pytest.approx(1.75)
    with pytest.raises(PlanningError):
        expected_loss_per_failure(-1.0, 0.0, 0.0)
    with pytest.raises(PlanningError):
        expected_failures(1.0, 0.0)


def test_young_and_daly_domain_check() -> None:
    # Young: sqrt(2 x 5/60 x 24) = sqrt(4) = 2 h
    assert young_interval(FIVE_MIN, 24.0) == pytest.approx(2.0)
    # Daly: x = d/2M = 1/576, sqrt(x) = 1/24: 2 (1 + 1/72 + 1/5184) - 1/12 = 1.94483 h = 116.7 min
    tau = daly_interval(FIVE_MIN, 24.0)
    assert tau == pytest.approx(1.944830, abs=1e-6)
    assert round(tau * 60) == 117
    # d >= 2M: tau = M
    assert daly_interval(10.0, 4.0) == 4.0
    with pytest.raises(PlanningError):
        young_interval(-1.0, 1.0)
    with pytest.raises(PlanningError):
        daly_interval(1.0, 0.0)


def test_ettr_hand_worked() -> None:
    # c = 2, u0 = 0.25, d = 5 min, M = 24:
    # (1 - 1.25/24) / (1 + (1/12)/2) = (22.75/24) / (25/24) = 0.91
    assert ettr(2.0, 0.25, FIVE_MIN, 24.0) == pytest.approx(0.91)
    # interval longer than 2M: numerator negative -> clamped to 0
    assert ettr(100.0, 0.0, 0.1, 10.0) == 0.0
    with pytest.raises(PlanningError):
        ettr(0.0, 0.0, 0.1, 10.0)


@PROPERTY
@given(
    st.floats(1e-3, 1.0),  # d, much smaller than M: the regime both models are built for
    st.floats(100.0, 1000.0),  # M
    st.floats(0.0, 1.0),  # u0
)
def test_daly_interval_maximizes_ettr_nearby(d: float, m: float, u0: float) -> None:
    tau = daly_interval(d, m)
    if tau < m:  # the first-order optimum; compare with its neighbours
        best = ettr(tau, u0, d, m)
        assert best >= ettr(tau * 0.7, u0, d, m) - 1e-9
        assert best >= ettr(tau * 1.4, u0, d, m) - 1e-9
    assert 0.0 <= ettr(max(tau, 1e-6), u0, d, m) <= 1.0


def test_checkpoint_overhead_limits() -> None:
    # T = 48, c = 4, d = 5 min: writes 12 x 1/12 = 1 h; failures 48/24 x (2 + 0.25) = 4.5 h
    assert checkpoint_overhead_hours(4.0, FIVE_MIN, 24.0, 48.0, 0.25) == pytest.approx((1.0, 4.5))
    assert checkpoint_overhead_hours(0.0, 0.0, 24.0, 48.0, 0.25) == pytest.approx((0.0, 0.5))
    assert checkpoint_overhead_hours(4.0, FIVE_MIN, math.inf, 48.0, 0.25) == (1.0, 0.0)
    assert checkpoint_overhead_hours(0.0, FIVE_MIN, 24.0, 48.0, 0.0)[0] == math.inf
    with pytest.raises(PlanningError):
        checkpoint_overhead_hours(-1.0, FIVE_MIN, 24.0, 48.0, 0.0)


def test_checkpoint_advice_hand_worked() -> None:
    # 8 workers at lambda = 1/192 -> M = 24 h; d = 5 min; T = 48 h; u0 = 0.25 h.
    # Current c = 4 h: writes 48/4 x 1/12 = 1 h, failures 2 x (2 + 0.25) = 4.5 h -> 5.5 h x 8 = 44
    # Daly c = 1.94483 h: writes 24.681 x 1/12 = 2.05673 h, failures 2 x (0.97242 + 0.25)
    #   = 2.44483 h -> 4.50156 h x 8 = 36.0125 GPU-h. Saving 7.9875 x 4 runs = 31.950 GPU-h, $63.90
    a = hand_worked_advice(write_hours=FIVE_MIN)
    assert a.mtbf_hours == pytest.approx(24.0)
    assert a.young_interval_hours == pytest.approx(2.0)
    assert a.daly_interval_hours == pytest.approx(1.944830, abs=1e-6)
    assert a.expected_failures_per_run == pytest.approx(2.0)
    assert a.write_gpu_hours_per_run == pytest.approx(8.0)
    assert a.failure_loss_gpu_hours_per_run == pytest.approx(36.0)
    assert a.overhead_gpu_hours_per_run_current == pytest.approx(44.0)
    assert a.overhead_gpu_hours_per_run_optimal == pytest.approx(36.0125, abs=1e-3)
    assert a.monthly_gpu_hours_saved == pytest.approx(31.950, abs=1e-2)
    assert a.monthly_usd_saved == pytest.approx(63.90, abs=2e-2)
    # ETTR: current (1 - 2.25/24) / (1 + 1/48) = 0.887755; Daly (1 - 1.22242/24) / (1 + 0.042849)
    assert a.ettr_current == pytest.approx(0.887755, abs=1e-6)
    assert a.ettr_optimal == pytest.approx(0.910072, abs=1e-5)
    assert a.ettr_optimal > a.ettr_current
    assert any("Daly" in n for n in a.notes)


def test_checkpoint_advice_without_failures_or_write_cost() -> None:
    no_failures = checkpoint_advice(
        write_hours=FIVE_MIN,
        current_interval_hours=1.0,
        workers=4,
        wall_clock_hours=10.0,
        runs_per_month=4.0,
        price_per_gpu_hour=1.0,
        failure_rate_per_instance_hour=0.0,
    )
    # nothing fails: the best is never to checkpoint; current writes 10 x 1/12 h x 4 workers
    assert no_failures.daly_interval_hours == math.inf
    assert no_failures.overhead_gpu_hours_per_run_current == pytest.approx(10 / 12 * 4)
    assert no_failures.overhead_gpu_hours_per_run_optimal == 0.0
    free_writes = checkpoint_advice(
        write_hours=0.0,
        current_interval_hours=1.0,
        workers=1,
        wall_clock_hours=10.0,
        runs_per_month=1.0,
        price_per_gpu_hour=1.0,
        failure_rate_per_instance_hour=0.1,
        resume_hours=0.5,
    )
    # M = 10; free writes -> checkpoint continuously: only the 0.5 h restarts are lost, 1 per run
    assert free_writes.daly_interval_hours == 0.0
    assert free_writes.overhead_gpu_hours_per_run_optimal == pytest.approx(0.5)
    assert free_writes.ettr_optimal == pytest.approx(0.95)
    for bad_interval, bad_write in ((0.0, 0.1), (1.0, -0.1)):
        with pytest.raises(PlanningError):
            checkpoint_advice(
                write_hours=bad_write,
                current_interval_hours=bad_interval,
                workers=1,
                wall_clock_hours=1.0,
                runs_per_month=1.0,
                price_per_gpu_hour=1.0,
            )


def test_write_hours_per_checkpoint() -> None:
    # 2 h of blocking writes over 14 h at a 2 h interval = 7 checkpoints -> 2/7 h each
    assert write_hours_per_checkpoint(2.0, 14.0, 2.0) == pytest.approx(2 / 7)
    assert write_hours_per_checkpoint(0.5, 1.0, 2.0) == pytest.approx(0.5)  # at least one
    with pytest.raises(PlanningError):
        write_hours_per_checkpoint(0.5, 0.0, 2.0)


def test_failure_rate_estimate_with_garwood_interval() -> None:
    # k = 10 in 10,000 instance-hours: 1e-3/h; chi2(0.025, 20)/2 = 4.795, chi2(0.975, 22)/2 = 18.39
    e = estimate_failure_rate(10, 10_000.0)
    assert e is not None and e.sufficient
    assert e.rate == pytest.approx(1e-3)
    assert e.lower == pytest.approx(4.7954e-4, rel=1e-3)
    assert e.upper == pytest.approx(1.8390e-3, rel=1e-3)


def test_failure_rate_estimate_insufficient_and_empty() -> None:
    # k = 0: upper = -ln(0.025) / 1000 = 3.689e-3
    e = estimate_failure_rate(0, 1000.0)
    assert e is not None and not e.sufficient
    assert (e.rate, e.lower) == (0.0, 0.0)
    assert e.upper == pytest.approx(-math.log(0.025) / 1000)
    assert "default" in e.note
    two = estimate_failure_rate(2, 1000.0)
    assert two is not None and not two.sufficient
    assert estimate_failure_rate(5, 0.0) is None
    with pytest.raises(PlanningError):
        estimate_failure_rate(-1, 10.0)


def test_checkpoint_notes_say_durations_in_words() -> None:
    # A write of 1.6e-5 s (4.43e-09 h) once printed as "4.43e-09 h writing"; the same
    # advice now says "under 1 s". M = 24 h; Young sqrt(2 x 4.43e-9 x 24) = 4.6e-4 h = 2 s;
    # current interval 4 h.
    a = hand_worked_advice(write_hours=4.43e-09)
    text = " ".join(a.notes)
    assert "e-0" not in text
    assert "M = 1/(8 instances x 0.00520833) = 24 h" in text
    assert "Young sqrt(2dM) = 2 s" in text and "current = 4 h" in text
    assert "Per run: under 1 s writing + " in text
