"""Cadence cost projection and what-ifs (methodology.md §1 worked example, §5)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.planning.model import PlanningError, RunFacts
from app.planning.projection import (
    WEEKS_PER_MONTH,
    project_costs,
    project_from_inputs,
    runs_per_month,
    weeks_per_month,
)
from app.planning.scaling import ScalingPoint, fit_usl
from app.planning.whatif import WhatIf, apply_what_if
from tests.fixtures.old_estimator import bootstrap_median_band
from tests.fixtures.planning import PROPERTY, make_run_facts, runs

BASELINE = make_run_facts()  # 8 x 14 h = 112 GPU-h at 38%, $2/GPU-h
PROBE_MODEL = fit_usl([ScalingPoint(8, 14.0), ScalingPoint(16, 13.0)])


def test_weeks_per_month_conventions() -> None:
    assert WEEKS_PER_MONTH == {"calendar": 52 / 12, "four_week": 4.0}
    assert runs_per_month(1) == pytest.approx(4.3333333)
    assert runs_per_month(2, "four_week") == 8.0
    assert weeks_per_month() == pytest.approx(52 / 12)
    with pytest.raises(PlanningError):
        runs_per_month(1, "lunar")
    with pytest.raises(PlanningError):
        runs_per_month(-1)


@pytest.mark.parametrize(
    ("convention", "weekly_gpu_hours", "twice_weekly_gpu_hours"),
    [
        # calendar: 112 x 52/12 = 485.33; 2 x 60.8 x 52/12 = 526.93
        ("calendar", 112 * 52 / 12, 2 * 60.8 * 52 / 12),
        # four-week month: 112 x 4 = 448; 2 x 60.8 x 4 = 486.4
        ("four_week", 448.0, 486.4),
    ],
)
def test_worked_example_twice_weekly_at_70_percent(
    convention: str, weekly_gpu_hours: float, twice_weekly_gpu_hours: float
) -> None:
    # 38% -> 70%: G = 112 x 38/70 = 60.8 GPU-h; ratio 2 x 60.8 / 112 = 1.0857 (+8.6%)
    p = project_costs(
        [BASELINE],
        [2.0],
        convention=convention,
        current_runs_per_week=1.0,
        what_if=WhatIf(utilization_target=0.70),
    )
    twice = p.cadences[0]
    assert twice.gpu_hours_per_run == pytest.approx(60.8)
    assert twice.wall_clock_hours_per_run == pytest.approx(14 * 38 / 70)
    assert twice.monthly_gpu_hours == pytest.approx(twice_weekly_gpu_hours)
    assert p.current_monthly_gpu_hours == pytest.approx(weekly_gpu_hours)
    assert p.current_monthly_cost_usd == pytest.approx(weekly_gpu_hours * 2.0)
    assert twice.vs_current_ratio is not None
    assert twice.vs_current_ratio == pytest.approx(2 * 60.8 / 112)
    assert round(twice.vs_current_ratio - 1, 3) == 0.086
    assert any("+8.6%" in line for line in twice.working)


def test_worked_example_sixteen_workers_via_scaling_model() -> None:
    # Amdahl through (8, 14 h) and (16, 13 h): T(16) = 14 x C(8)/C(16) = 13 h; 16 x 13 = 208 GPU-h
    p = project_costs([BASELINE], [1.0], what_if=WhatIf(workers=16), scaling_model=PROBE_MODEL)
    c = p.cadences[0]
    assert c.gpu_hours_per_run == pytest.approx(208.0)
    assert c.wall_clock_hours_per_run == pytest.approx(13.0)
    assert c.cost_per_run_usd == pytest.approx(416.0)
    assert p.warnings == ()
    assert "16 workers" in p.notes[0]


def test_workers_what_if_without_model_warns_and_is_not_applied() -> None:
    p = project_costs([BASELINE], [1.0], what_if=WhatIf(workers=16))
    assert p.cadences[0].gpu_hours_per_run == pytest.approx(112.0)
    assert len(p.warnings) == 1 and "scaling model" in p.warnings[0]


def test_workers_extrapolation_is_labelled() -> None:
    p = project_costs([BASELINE], [1.0], what_if=WhatIf(workers=32), scaling_model=PROBE_MODEL)
    assert any("extrapolating" in w for w in p.warnings)


def test_price_and_failure_rate_what_ifs() -> None:
    # price $3: 112 x 3 = $336 per run
    adj, warnings = apply_what_if(BASELINE, WhatIf(price=3.0), None)
    assert adj.cost_usd == pytest.approx(336.0) and warnings == []
    # lambda = 1e-3, 8 workers: M = 125 h; T/M = 14/125 = 0.112 failures;
    # loss per failure 2/2 + 0.25 + 0.25 = 1.5 h; x 8 workers: + 0.112 x 1.5 x 8 = 1.344 GPU-h
    w = WhatIf(
        failure_rate_per_instance_hour=1e-3,
        checkpoint_interval_hours=2.0,
        resume_hours=0.25,
        reschedule_hours=0.25,
    )
    adj, warnings = apply_what_if(BASELINE, w, None)
    assert adj.gpu_hours == pytest.approx(113.344) and warnings == []
    adj, warnings = apply_what_if(BASELINE, WhatIf(failure_rate_per_instance_hour=1e-3), None)
    assert adj.gpu_hours == pytest.approx(112.0) and "checkpoint interval" in warnings[0]


def test_utilization_target_edge_cases() -> None:
    # target below the observed 38%: G goes up (112 x 38/19 = 224) with a warning
    adj, warnings = apply_what_if(BASELINE, WhatIf(utilization_target=0.19), None)
    assert adj.gpu_hours == pytest.approx(224.0) and "below" in warnings[0]
    assert "target 19% is below the observed 38%" in warnings[0]
    # Close numbers get the digits that tell them apart: never "70% ... the observed 70%".
    _, warnings = apply_what_if(
        make_run_facts(gpu_utilization=0.704), WhatIf(utilization_target=0.70), None
    )
    assert "target 70.0% is below the observed 70.4%" in warnings[0]
    adj, warnings = apply_what_if(
        make_run_facts(gpu_utilization=0.0), WhatIf(utilization_target=0.5), None
    )
    assert adj.gpu_hours == pytest.approx(112.0) and "0%" in warnings[0]


@pytest.mark.parametrize(
    "bad",
    [
        {"price": -1.0},
        {"utilization_target": 0.0},
        {"utilization_target": 1.5},
        {"workers": 0},
        {"failure_rate_per_instance_hour": -1e-4},
        {"checkpoint_interval_hours": 0.0},
        {"resume_hours": -1.0},
    ],
)
def test_what_if_validation(bad: dict[str, float]) -> None:
    with pytest.raises(PlanningError):
        WhatIf(**bad)  # type: ignore[arg-type]


def test_budget_headroom_is_the_expected_bill_and_the_typical_run_the_median() -> None:
    # costs $200, $224, $300 (G 100, 112, 150 at $2): a typical (median) retraining $224,
    # the mean $241.33; weekly the expected bill is 4.3333 x 241.33 = $1,045.78
    rs = [make_run_facts(gpu_hours=100.0), BASELINE, make_run_facts(gpu_hours=150.0)]
    p = project_costs(rs, [1.0, 2.0], budget_usd=1500.0)
    weekly, twice = p.cadences
    mean = (200 + 224 + 300) / 3
    assert weekly.cost_per_run_usd == pytest.approx(224.0)
    assert weekly.monthly_cost_usd == pytest.approx(mean * 52 / 12) == weekly.expected_bill_usd
    assert weekly.headroom_usd == pytest.approx(1500 - mean * 52 / 12) and weekly.within_budget
    # twice weekly: 8.6667 x 241.33 = $2,091.56 > $1,500, over by $591.56
    assert twice.headroom_usd == pytest.approx(1500 - 2 * mean * 52 / 12)
    assert not twice.within_budget
    assert twice.vs_current_ratio is None and p.current_monthly_cost_usd is None
    assert weekly.monthly_cost_p10_usd <= weekly.monthly_cost_usd <= weekly.monthly_cost_p90_usd
    # The verdict is the one test, P(bill > budget) against the 10% tolerance (whatever
    # the bootstrap's P is, the word follows it, never the expected bill alone).
    for c in (weekly, twice):
        assert c.p_over_budget is not None
        assert c.within_budget == (c.p_over_budget < 0.1)
    assert any("does not fit" in line for line in twice.working)
    assert any(line.endswith(": fits.") for line in weekly.working)


def test_bootstrap_band_two_runs_spans_both() -> None:
    # n = 2: a resample's median is a (p = 1/4), (a+b)/2 (1/2) or b (1/4) -> p10 = a, p90 = b
    assert bootstrap_median_band([100.0, 200.0]) == (100.0, 200.0)
    assert bootstrap_median_band([5.0]) == (5.0, 5.0)
    with pytest.raises(PlanningError):
        bootstrap_median_band([])


def test_bootstrap_is_seeded() -> None:
    values = [100.0, 103.0, 110.0, 120.0, 180.0, 95.0, 130.0]
    assert bootstrap_median_band(values, seed=3) == bootstrap_median_band(values, seed=3)
    lo, hi = bootstrap_median_band(values)
    assert 95.0 <= lo <= 110.0 <= hi <= 130.0


def test_project_costs_errors() -> None:
    with pytest.raises(PlanningError):
        project_costs([], [1.0])
    with pytest.raises(PlanningError):
        project_costs([BASELINE], [1.0], convention="fortnight")
    with pytest.raises(PlanningError):
        project_costs([BASELINE], [1.0], budget_usd=-5.0)


def test_project_from_inputs_reproduces_worked_example() -> None:
    p = project_from_inputs(
        workers=8,
        wall_clock_hours=14.0,
        utilization=0.38,
        price_per_gpu_hour=2.0,
        cadences=[1.0, 2.0],
        current_runs_per_week=1.0,
        what_if=WhatIf(utilization_target=0.7),
        convention="four_week",
    )
    assert p.runs_used == 1
    assert p.cadences[1].monthly_gpu_hours == pytest.approx(486.4)  # 2 x 60.8 x 4
    assert p.cadences[1].vs_current_ratio == pytest.approx(1.0857, abs=1e-4)
    assert p.notes[0].startswith("From inputs: 8 workers x 14 h = 112 GPU-h")
    assert not any(n.startswith("Only ") for n in p.notes)


@PROPERTY
@given(
    st.lists(runs(), min_size=1, max_size=5),
    st.lists(st.floats(0.0, 14.0), min_size=2, max_size=5),
)
def test_projection_monotone_in_cadence(rs: list[RunFacts], cadences: list[float]) -> None:
    p = project_costs(rs, sorted(cadences))
    for a, b in zip(p.cadences, p.cadences[1:], strict=False):
        assert a.monthly_cost_usd <= b.monthly_cost_usd * (1 + 1e-12) + 1e-9
        assert a.monthly_cost_p10_usd <= b.monthly_cost_p10_usd * (1 + 1e-12) + 1e-9
        assert a.monthly_cost_p90_usd <= b.monthly_cost_p90_usd * (1 + 1e-12) + 1e-9
        assert a.monthly_gpu_hours <= b.monthly_gpu_hours * (1 + 1e-12) + 1e-9


@PROPERTY
@given(
    st.lists(runs(), min_size=1, max_size=5),
    st.floats(0.0, 10.0),
    st.floats(0.0, 10.0),
    st.floats(0.1, 7.0),
)
def test_projection_monotone_in_price(rs: list[RunFacts], p1: float, p2: float, k: float) -> None:
    low, high = sorted((p1, p2))
    a = project_costs(rs, [k], what_if=WhatIf(price=low)).cadences[0]
    b = project_costs(rs, [k], what_if=WhatIf(price=high)).cadences[0]
    assert a.monthly_cost_usd <= b.monthly_cost_usd * (1 + 1e-12) + 1e-9
    assert a.monthly_cost_p10_usd <= b.monthly_cost_p10_usd * (1 + 1e-12) + 1e-9
    assert a.monthly_cost_p90_usd <= b.monthly_cost_p90_usd * (1 + 1e-12) + 1e-9


def test_what_if_notes_describe_every_applied_change() -> None:
    assert WhatIf().is_empty and not WhatIf(price=1.0).is_empty
    w = WhatIf(
        price=3.0,
        utilization_target=0.7,
        failure_rate_per_instance_hour=4e-4,
        checkpoint_interval_hours=1.0,
    )
    p = project_costs([BASELINE], [1.0], what_if=w)
    note = p.notes[0]
    assert "utilization target 70%" in note and "failure rate 0.0004" in note and "$3" in note
    # 60.8 GPU-h, then + 7.6 h x 8 x 4e-4 failures x (0.5 h) x 8 workers = 0.09728 GPU-h
    assert p.cadences[0].gpu_hours_per_run == pytest.approx(60.8 + 7.6 * 8 * 4e-4 * 0.5 * 8)
    notes = project_costs([BASELINE], [1.0], what_if=WhatIf()).notes
    assert notes[0].startswith("Band: p10-p90") and notes[1].startswith("Only 1 run")


def test_today_can_be_another_variants_runs() -> None:
    # candidate at 60.8 GPU-h twice weekly vs baseline (112 GPU-h) weekly: 2 x 60.8 / 112
    cand = [make_run_facts(gpu_hours=60.8)]
    p = project_costs(cand, [2.0], current_runs_per_week=1.0, current_runs=[BASELINE])
    assert p.cadences[0].vs_current_ratio == pytest.approx(1.0857, abs=1e-4)
