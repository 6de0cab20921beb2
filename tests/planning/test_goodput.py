"""Goodput factors per run and GPU-hour weighted across runs (methodology.md §3)."""

from __future__ import annotations

import sqlite3
from datetime import datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.planning.goodput import (
    EMPTY_TOTALS,
    goodput_from_totals,
    overall,
    overall_goodput,
    program_basis,
    program_goodput,
    run_goodput,
    run_totals,
    runtime_goodput,
    scheduling_goodput,
)
from app.planning.model import Interruption, RunFacts
from tests.fixtures.planning import PROPERTY, make_run_facts, runs, totals_from_runs


def _example() -> RunFacts:
    return make_run_facts(
        workers=8,
        wall_clock_hours=10.0,
        gpu_utilization=0.5,
        scheduling_wait_hours=2.0,
        checkpoint_hours=1.0,
        interruptions=(
            Interruption(lost_progress_hours=1.0, resume_hours=0.5, reschedule_hours=0.5),
        ),
    )


def test_per_run_factors_hand_worked() -> None:
    run = _example()
    # P = Q + T = 12; S = (12 - 2 - 0.5) / 12 = 9.5 / 12
    assert scheduling_goodput(run) == pytest.approx(9.5 / 12)
    # tc = trm + tch + checkpoint = 0.5 + 1 + 1 = 2.5; R = (10 - 2.5 - 0.5) / (10 - 0.5) = 7 / 9.5
    assert runtime_goodput(run) == pytest.approx(7 / 9.5)
    # no MFU: the utilization proxy, busy share of the forward-progress time (DOMAIN §3):
    # (u T - tch) / (T - tc - tre) = (5 - 1) / (10 - 2.5 - 0.5) = 4 / 7, flagged as a proxy
    assert program_goodput(run).value == pytest.approx(4 / 7) and program_goodput(run).is_proxy
    # overall = 9.5/12 x 7/9.5 x 4/7 = 4/12: the checkpoint/resume/reschedule idle time
    # inside 1 - u is not counted a second time (u alone would give 7/24)
    assert overall_goodput(run) == pytest.approx(1 / 3)
    assert overall is overall_goodput


def test_run_goodput_matches_per_run_functions() -> None:
    run = _example()
    g = run_goodput(run)
    assert g.scheduling == pytest.approx(scheduling_goodput(run))
    assert g.runtime == pytest.approx(runtime_goodput(run))
    assert g.program == pytest.approx(4 / 7)
    assert g.overall == pytest.approx(1 / 3)
    assert g.program_is_proxy and g.runs == 1 and g.gpu_hours == pytest.approx(80.0)


def test_mfu_preferred_over_utilization() -> None:
    run = make_run_facts(mfu=0.31)
    assert program_goodput(run).value == 0.31 and not program_goodput(run).is_proxy
    assert not run_goodput(run).program_is_proxy


def test_whole_wall_clock_rescheduling_gives_zero_runtime_goodput() -> None:
    run = make_run_facts(interruptions=(Interruption(0.0, 0.0, 14.0),))  # tre = T = 14
    assert runtime_goodput(run) == 0.0
    assert run_goodput(run).runtime == 0.0
    assert scheduling_goodput(run) == 0.0  # (14 - 0 - 14) / 14


def test_aggregate_is_ratio_of_sums_not_mean_of_ratios() -> None:
    # A: 8 workers x 10 h, no wait, MFU 0.5 -> period 80, unavailable 0, program 40
    # B: 1 worker x 10 h after a 10 h wait, u 0.2 -> period 20, unavailable 10, program 2
    # S = (100 - 10) / 100 = 0.9 (a mean of ratios would give (1 + 0.5) / 2 = 0.75)
    # Program = 42 / 90 = 0.4667, a proxy because B has no MFU
    a = make_run_facts(workers=8, wall_clock_hours=10.0, mfu=0.5)
    b = make_run_facts(
        workers=1, wall_clock_hours=10.0, scheduling_wait_hours=10.0, gpu_utilization=0.2
    )
    t = totals_from_runs([a, b])
    assert (t.runs, t.gpu_hours, t.period_gpu_hours, t.unavailable_gpu_hours) == (2, 90, 100, 10)
    assert t.mfu_gpu_hours == 80.0
    g = goodput_from_totals(t)
    assert g.scheduling == pytest.approx(0.9)
    assert g.runtime == pytest.approx(1.0)
    assert g.program == pytest.approx(42 / 90)
    assert g.overall == pytest.approx(0.9 * 42 / 90)
    assert g.program_is_proxy


def test_empty_totals_give_none() -> None:
    g = goodput_from_totals(totals_from_runs([]))
    assert (g.scheduling, g.runtime, g.program, g.overall) == (None, None, None, None)
    assert not g.program_is_proxy and g.runs == 0
    assert totals_from_runs([]) == EMPTY_TOTALS


# The SQL documented in GoodputTotals, run on SQLite (stdlib) against the Python sums.
_SQL = """
WITH r0 AS (
  SELECT *, (julianday(finished_at) - julianday(started_at)) * 24.0 AS t FROM run
), r AS (
  SELECT *, gpu_hours / t AS weff,
         gpu_hours / t * (t - reschedule_hours - resume_hours - lost_progress_hours
                          - checkpoint_hours) AS prog
  FROM r0
)
SELECT COUNT(*),
       SUM(gpu_hours),
       SUM(gpu_hours / t * (scheduling_wait_hours + t)),
       SUM(gpu_hours / t * (scheduling_wait_hours + reschedule_hours)),
       SUM(gpu_hours / t * (t - reschedule_hours)),
       SUM(gpu_hours / t * (resume_hours + lost_progress_hours + checkpoint_hours)),
       SUM(CASE WHEN mfu IS NOT NULL THEN mfu * MAX(prog, 0)
                WHEN MAX(gpu_utilization * gpu_hours - weff * lost_progress_hours, 0)
                     > MAX(prog, 0) THEN MAX(prog, 0)
                ELSE MAX(gpu_utilization * gpu_hours - weff * lost_progress_hours, 0) END),
       SUM(CASE WHEN mfu IS NOT NULL THEN gpu_hours ELSE 0 END)
FROM r
"""


def test_documented_sql_reproduces_python_totals() -> None:
    rs = [
        _example(),
        make_run_facts(mfu=0.4, gpu_hours=100.0),
        make_run_facts(workers=2, wall_clock_hours=3.0),
    ]
    db = sqlite3.connect(":memory:")
    db.execute(
        "CREATE TABLE run (started_at TEXT, finished_at TEXT, workers INT, gpu_hours REAL,"
        " gpu_utilization REAL, mfu REAL, scheduling_wait_hours REAL, checkpoint_hours REAL,"
        " lost_progress_hours REAL, resume_hours REAL, reschedule_hours REAL)"
    )
    start = datetime(2025, 1, 6)
    for r in rs:
        end = start + timedelta(hours=r.wall_clock_hours)
        db.execute(
            "INSERT INTO run VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            (
                start.isoformat(" "),
                end.isoformat(" "),
                r.workers,
                r.gpu_hours,
                r.gpu_utilization,
                r.mfu,
                r.scheduling_wait_hours,
                r.checkpoint_hours,
                r.lost_progress_hours,
                r.resume_hours,
                r.reschedule_hours,
            ),
        )
    row = db.execute(_SQL).fetchone()
    py = totals_from_runs(rs)
    expected = (
        py.runs,
        py.gpu_hours,
        py.period_gpu_hours,
        py.unavailable_gpu_hours,
        py.held_gpu_hours,
        py.runtime_loss_gpu_hours,
        py.program_gpu_hours,
        py.mfu_gpu_hours,
    )
    assert row == pytest.approx(expected, rel=1e-6)


@PROPERTY
@given(runs())
def test_single_run_goodputs_in_unit_interval(run: RunFacts) -> None:
    g = run_goodput(run)
    for value in (g.scheduling, g.runtime, g.program, g.overall):
        assert value is not None and 0.0 <= value <= 1.0
    assert g.overall == pytest.approx(overall_goodput(run), abs=1e-12)


@PROPERTY
@given(st.lists(runs(), min_size=1, max_size=6))
def test_aggregate_goodputs_in_unit_interval_and_totals_add(rs: list[RunFacts]) -> None:
    t = totals_from_runs(rs)
    g = goodput_from_totals(t)
    for value in (g.scheduling, g.runtime, g.program, g.overall):
        assert value is not None and 0.0 <= value <= 1.0
    split = totals_from_runs(rs[:1]) + totals_from_runs(rs[1:])
    assert split.gpu_hours == pytest.approx(t.gpu_hours)
    assert split.period_gpu_hours == pytest.approx(t.period_gpu_hours)
    assert run_totals(rs[0]).runs == 1


@pytest.mark.parametrize(
    ("mfu_gpu_hours", "gpu_hours", "basis"),
    [
        (80.0, 80.0, "mfu"),  # every GPU-hour had an MFU figure
        (0.0, 80.0, "utilization"),  # none had: the utilization proxy throughout
        (80.0, 88.0, "mixed"),  # 8 GPU-hours of scaling probes without MFU
        (0.0, 0.0, "utilization"),  # no runs: nothing measured by MFU
    ],
)
def test_program_basis_is_gpu_hour_weighted(
    mfu_gpu_hours: float, gpu_hours: float, basis: str
) -> None:
    assert program_basis(mfu_gpu_hours, gpu_hours) == basis
