"""Issue 12: modelling bugs of the pure core, each with a hand-worked regression test."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.planning.bill import forecast_bill
from app.planning.failures import checkpoint_advice, cluster_mtbf_hours
from app.planning.gate import GateThresholds, evaluate_gate
from app.planning.goodput import program_goodput, run_goodput
from app.planning.levers import rank_levers
from app.planning.model import Interruption, RunFacts
from app.planning.projection import project_costs
from app.planning.scaling import (
    MIN_EFFICIENCY_TO_SCALE,
    MIN_UTILIZATION_TO_SCALE,
    ScalingModel,
    scaling_advice,
)
from app.planning.schedule import exactly
from app.planning.whatif import WhatIf, apply_what_if
from tests.fixtures.planning import PROPERTY, make_run_facts, runs

PERFECT = ScalingModel("amdahl", 0.0, 0.0, 100.0, 1, 64, 0.0)  # C(N) = N


def failing_run() -> RunFacts:
    # 8 workers x 10 h = 80 GPU-h at $2; one failure: 0.5 h lost + 0.5 h resume.
    return make_run_facts(
        workers=8,
        wall_clock_hours=10.0,
        gpu_utilization=0.5,
        interruptions=(Interruption(0.5, 0.5, 0.0),),
    )


def test_bug2_instances_set_the_mtbf_only() -> None:
    # 8 instances at 3e-4/h and 24 at 1e-4/h: both M = 1 / 2.4e-3 = 416.67 h.
    # d = 0.1 h, c = 1 h, T = 14 h, 8 paid GPUs, u0 = 0:
    #   writes = 14 / 1 x 0.1 = 1.4 h; failures = 14 / 416.67 x 0.5 = 0.0168 h;
    #   overhead = (1.4 + 0.0168) x 8 GPUs = 11.3344 GPU-h per run (not x 24 instances).
    kw = dict(
        write_hours=0.1,
        current_interval_hours=1.0,
        workers=8,
        wall_clock_hours=14.0,
        runs_per_month=52 / 12,
        price_per_gpu_hour=2.0,
    )
    a = checkpoint_advice(**kw, instances=8, failure_rate_per_instance_hour=3e-4)
    b = checkpoint_advice(**kw, instances=24, failure_rate_per_instance_hour=1e-4)
    assert a.mtbf_hours == pytest.approx(416.6667, rel=1e-5) == b.mtbf_hours
    assert a.overhead_gpu_hours_per_run_current == pytest.approx(11.3344, rel=1e-4)
    assert a.failure_loss_gpu_hours_per_run == pytest.approx(0.0168 * 8, rel=1e-4)
    assert a.monthly_usd_saved == pytest.approx(b.monthly_usd_saved)
    assert a.overhead_gpu_hours_per_run_current == pytest.approx(
        b.overhead_gpu_hours_per_run_current
    )
    assert cluster_mtbf_hours(24, 1e-4) == pytest.approx(a.mtbf_hours)


def test_bug3_failure_rate_replaces_the_recorded_loss() -> None:
    run = failing_run()
    # rate 0 removes the recorded 1 h of failure loss: T = 9 h, G = 72, $144 (was $160).
    zero, _ = apply_what_if(
        run, WhatIf(failure_rate_per_instance_hour=0.0, checkpoint_interval_hours=2.0), None
    )
    assert (zero.wall_clock_hours, zero.gpu_hours, zero.cost_usd) == pytest.approx((9, 72, 144))
    # rate 1e-3, interval 2 h, resume 0.5 h: M = 1 / (8 x 1e-3) = 125 h; expected failures
    # 9 / 125 = 0.072, each losing 2/2 + 0.5 = 1.5 h -> T = 9.108 h, G = 72.864.
    w = WhatIf(failure_rate_per_instance_hour=1e-3, checkpoint_interval_hours=2.0, resume_hours=0.5)
    adj, _ = apply_what_if(run, w, None)
    assert adj.wall_clock_hours == pytest.approx(9.108)
    assert adj.gpu_hours == pytest.approx(72.864)
    assert adj.cost_usd < run.cost_usd  # fewer failures than recorded: a saving


@PROPERTY
@given(runs(), st.floats(0, 1e-2), st.floats(0, 1e-2), st.floats(0.1, 24))
def test_bug3_a_lower_failure_rate_never_costs_more(
    run: RunFacts, a: float, b: float, interval: float
) -> None:
    lo, hi = sorted((a, b))
    cost = [
        apply_what_if(
            run, WhatIf(failure_rate_per_instance_hour=r, checkpoint_interval_hours=interval), None
        )[0].cost_usd
        for r in (lo, hi)
    ]
    assert cost[0] <= cost[1] * (1 + 1e-9) + 1e-12


def test_bug4_workers_scale_nominal_workers() -> None:
    # 16 workers x 13 h but G = 180 (workers changed mid-run): G/T = 13.846.
    # N = 16 is the run's own W: nothing changes (13 h, 180 GPU-h), not 16 x 13 = 208
    # nor 180/16 = 11.25 h (issue 23: $4,111 instead of $3,600).
    run = make_run_facts(workers=16, wall_clock_hours=13.0, gpu_hours=180.0)
    adj, _ = apply_what_if(run, WhatIf(workers=16), PERFECT)
    assert adj.wall_clock_hours == pytest.approx(13.0)
    assert adj.gpu_hours == pytest.approx(180.0)
    # N = 32 under perfect scaling: T' = 13 x C(16)/C(32) = 6.5 h, effective workers
    # 13.846 x 32/16 = 27.69, G' = 27.69 x 6.5 = 180 GPU-h (perfect scaling costs the same).
    adj, _ = apply_what_if(run, WhatIf(workers=32), PERFECT)
    assert adj.wall_clock_hours == pytest.approx(6.5)
    assert adj.workers == pytest.approx(180.0 / 13.0 * 2)
    assert adj.gpu_hours == pytest.approx(180.0)


def test_bug4_recorded_failure_rate_changes_nothing() -> None:
    # A run that lost 1 h of 14 to one failure (0.5 + 0.25 + 0.25 h), G = 112. At the
    # recorded rate the run stays as recorded (112 GPU-h); at rate 0 the loss goes:
    # 8 x 13 = 104 GPU-h; at another rate the model's loss replaces it:
    # 13 + 13 x 8 x 1e-3 x (2/2 + 0.25) = 13.13 h, x 8 = 105.04 GPU-h.
    run = make_run_facts(gpu_hours=112.0, interruptions=(Interruption(0.5, 0.25, 0.25),))

    def at(rate: float) -> float:
        w = WhatIf(
            failure_rate_per_instance_hour=rate,
            checkpoint_interval_hours=2.0,
            resume_hours=0.25,
            recorded_failure_rate=2e-3,
        )
        return apply_what_if(run, w, None)[0].gpu_hours

    assert at(2e-3) == pytest.approx(112.0)
    assert at(0.0) == pytest.approx(104.0)
    assert at(1e-3) == pytest.approx(105.04)
    assert WhatIf(failure_rate_per_instance_hour=2e-3, recorded_failure_rate=2e-3).is_empty is False


@PROPERTY
@given(runs())
def test_bug4_a_what_if_equal_to_today_changes_nothing(run: RunFacts) -> None:
    full = RunFacts(
        workers=run.workers,
        wall_clock_hours=run.wall_clock_hours,
        gpu_hours=run.workers * run.wall_clock_hours,
        gpu_utilization=max(run.gpu_utilization, 0.01),
        price_per_gpu_hour=run.price_per_gpu_hour,
    )
    same = WhatIf(
        price=full.price_per_gpu_hour, utilization_target=full.gpu_utilization, workers=full.workers
    )
    adj, _ = apply_what_if(full, same, PERFECT)
    assert adj.gpu_hours == pytest.approx(full.gpu_hours)
    assert adj.wall_clock_hours == pytest.approx(full.wall_clock_hours)
    assert adj.cost_usd == pytest.approx(full.cost_usd)


def test_bug5_levers_use_the_scenario_price() -> None:
    # One run, 5 h data stall x 8 workers = 40 GPU-h; at 4.333 runs/month: 173.3 GPU-h.
    # At the run's $2: $346.67; at a scenario price of $3: $520 a month.
    run = make_run_facts(data_stall_hours=5.0)
    own = {lv.cause: lv for lv in rank_levers([run], runs_per_month=52 / 12)}
    priced = {lv.cause: lv for lv in rank_levers([run], runs_per_month=52 / 12, price=3.0)}
    assert own["data_stall"].usd_per_month == pytest.approx(346.6667, rel=1e-5)
    assert priced["data_stall"].usd_per_month == pytest.approx(520.0)


def test_bug7_proxy_goodput_does_not_count_pauses_twice() -> None:
    # methodology.md §3 check: T = 10, u = 0.5, C = 1, tch = 0.5, trm = 0.5, tre = 0.
    # R = (10 - 2) / 10 = 0.8; P = (5 - 0.5) / (10 - 1 - 1) = 0.5625; R x P = 0.45.
    run = make_run_facts(
        workers=1,
        wall_clock_hours=10.0,
        gpu_utilization=0.5,
        checkpoint_hours=1.0,
        interruptions=(Interruption(0.5, 0.5, 0.0),),
    )
    assert program_goodput(run).value == pytest.approx(0.5625)
    g = run_goodput(run)
    assert g.runtime == pytest.approx(0.8)
    assert g.overall == pytest.approx(0.45)


def test_bug8_one_set_of_thresholds_and_advice_states_the_cost() -> None:
    # E = 0.75: GPU-hours x 1/0.75 = +33%; 1,000 GPU-h a month at $2 -> +333 GPU-h, +$667.
    advice = scaling_advice(0.9, 0.75, monthly_gpu_hours=1000.0, price_per_gpu_hour=2.0)
    text = " ".join(advice)
    assert "+33%" in text and "+333 GPU-h" in text and "+33% GPU-hours = +$667 a month" in text
    assert "close to constant" not in text
    # the same thresholds gate the "Add workers" lever: at 0.79 neither recommends it
    assert (MIN_UTILIZATION_TO_SCALE, MIN_EFFICIENCY_TO_SCALE) == (0.8, 0.8)
    busy = [make_run_facts(gpu_utilization=0.9)]
    assert all(lv.cause != "workers" for lv in rank_levers(busy, runs_per_month=4, efficiency=0.79))
    assert "below 80%" in " ".join(scaling_advice(0.9, 0.79))


@PROPERTY
@given(
    st.lists(runs(with_quality=True), min_size=3, max_size=6),
    st.floats(0.25, 14),
    st.none() | st.floats(0.0, 20.0),
    st.none() | st.floats(0.05, 1.0),
    st.sampled_from(["expected_bill", "p90"]),
    st.sampled_from(["calendar", "four_week"]),
)
def test_gate_cost_is_the_projection_for_the_same_scenario(
    cand: list[RunFacts],
    cadence: float,
    price: float | None,
    util: float | None,
    basis: str,
    convention: str,
) -> None:
    what_if = WhatIf(price=price, utilization_target=util)
    proj = project_costs(
        cand, [cadence], convention=convention, budget_usd=1e6, what_if=what_if
    ).cadences[0]
    gate = evaluate_gate(
        cand,
        cand,
        target_runs_per_week=cadence,
        budget_usd=1e6,
        convention=convention,
        thresholds=GateThresholds(cost_basis=basis),  # type: ignore[arg-type]
        what_if=what_if,
    )
    cost = gate.criteria[2]
    expected = proj.bill_p90_usd if basis == "p90" else proj.expected_bill_usd
    assert cost.value == pytest.approx(expected)
    assert cost.unit == "usd_per_month" and cost.basis == basis
    assert gate.projection is not None
    assert gate.projection.cadences[0].monthly_cost_usd == pytest.approx(proj.monthly_cost_usd)


def test_the_projections_monthly_figure_is_the_bill() -> None:
    # Costs $100, $200, $300 per run at 1 run/week x 4 weeks. The bill: N = 4 exactly,
    # expected 4 x mean $200 = $800; its band, P(bill > $1,000) and its percentiles are
    # those of forecast_bill over the same costs and month (seed 0). (The old median
    # month had a p90 of 4 x $300 = $1,200: a bootstrap median of 3 draws is $300 with
    # probability 7/27, a statement about the median, not the bill.)
    rs = [
        make_run_facts(gpu_hours=g, workers=8, wall_clock_hours=14.0) for g in (50.0, 100.0, 150.0)
    ]
    cp = project_costs(rs, [1.0], convention="four_week", budget_usd=1000.0).cadences[0]
    bill = forecast_bill([100.0, 200.0, 300.0], exactly(4), budget_usd=1000.0)
    assert cp.monthly_cost_usd == pytest.approx(800.0) == cp.expected_bill_usd
    assert (cp.monthly_cost_p10_usd, cp.monthly_cost_p90_usd) == (
        bill.bill_p10_usd,
        bill.bill_p90_usd,
    )
    assert cp.runs_in_month == 4.0 and cp.mean_cost_per_run_usd == pytest.approx(200.0)
    assert cp.expected_bill_usd == pytest.approx(800.0)
    assert cp.p_over_budget == bill.p_over_budget
    assert (cp.bill_p10_usd, cp.bill_p50_usd, cp.bill_p90_usd) == (
        bill.bill_p10_usd,
        bill.bill_p50_usd,
        bill.bill_p90_usd,
    )
    assert any("P(bill > $1,000 budget)" in w for w in cp.working)


def test_failure_rate_what_if_draws_failures_in_the_bill() -> None:
    # The worked example's run, 8 x 14 h, $2: at 1e-3/instance-h with a 2 h interval and
    # 0.25 + 0.25 h restart: expected failures 14 x 8 x 1e-3 = 0.112 per run, each
    # (1 + 0.5) h x 8 x $2 = $24; cost per run 224 + 0.112 x 24 = $226.688. At 2 a week,
    # 4-week months (8 runs): expected bill 8 x 226.688 = $1,813.50; every simulated bill
    # is 8 x $224 = $1,792 plus $24 per drawn failure, K ~ Poisson(8 x 0.112 = 0.896):
    # P(K = 0) = 0.408 (so p10 = $1,792), P(K <= 1) = 0.408 x 1.896 = 0.774,
    # P(K <= 2) = 0.774 + 0.408 x 0.896^2 / 2 = 0.937: p90 = 1792 + 2 x 24 = $1,840.
    w = WhatIf(
        failure_rate_per_instance_hour=1e-3,
        checkpoint_interval_hours=2.0,
        resume_hours=0.25,
        reschedule_hours=0.25,
    )
    cp = project_costs([make_run_facts()], [2.0], convention="four_week", what_if=w).cadences[0]
    assert cp.expected_bill_usd == pytest.approx(1813.504)
    assert cp.bill_p10_usd == pytest.approx(1792.0)
    assert (cp.bill_p90_usd - 1792.0) / 24.0 == pytest.approx(
        round((cp.bill_p90_usd - 1792.0) / 24.0)
    )
    # The recorded rate is a no-op: the bill is the recorded cost, 8 x $224.
    same = WhatIf(failure_rate_per_instance_hour=1e-3, recorded_failure_rate=1e-3)
    cp = project_costs([make_run_facts()], [2.0], convention="four_week", what_if=same).cadences[0]
    assert cp.expected_bill_usd == pytest.approx(1792.0) == cp.bill_p90_usd


def test_runs_still_needed_in_weeks_and_dollars_and_missing_quality() -> None:
    # Utilization 40/42/44 vs 50/54/58 %: uplift 12 points against +10. Runs without any
    # quality value: the gate says so rather than asking for more runs.
    base = [make_run_facts(gpu_utilization=u) for u in (0.40, 0.42, 0.44)]
    cand = [make_run_facts(gpu_utilization=u) for u in (0.50, 0.54, 0.58)]
    r = evaluate_gate(base, cand, target_runs_per_week=2, budget_usd=1e6, current_runs_per_week=1.0)
    util, quality = r.criteria[0], r.criteria[1]
    assert quality.runs_needed_per_arm is None and "report no quality_value" in quality.reason
    assert util.unit == "points" and quality.unit == "metric"
    # vb = 4, vc = 16 (points^2), gap 2: 80% power needs n with
    # (t_.95(df) + t_.80(df)) x sqrt(20 / n) <= 2, df = (n - 1) x 400 / 272:
    # n = 33: df 47.1, (1.678 + 0.849) x 0.7785 = 1.967 <= 2; n = 32: 2.527 x 0.7906 = 1.998
    # also clears, n = 31: df 44.1, (1.680 + 0.850) x 0.8032 = 2.032 > 2 -> 32 per arm,
    # 29 more. At 1 run/week: 29 weeks; each pair of runs costs 2 x 112 x $2 = $448:
    # 29 x 448 = $12,992.
    assert util.runs_needed_per_arm == 29
    assert r.runs_needed_weeks == pytest.approx(29.0)
    assert r.runs_needed_usd == pytest.approx(12992.0)
    assert "80% power" in util.reason


def test_cannot_pass_when_zero_variance_is_far_from_the_threshold() -> None:
    # Every run at 40% vs 42%: +2 points, no variance, threshold +10: no number of runs
    # like these passes, so FAIL ("cannot pass"), not INSUFFICIENT_DATA.
    base = [make_run_facts(gpu_utilization=0.40, quality_value=0.5) for _ in range(3)]
    cand = [make_run_facts(gpu_utilization=0.42, quality_value=0.5 + i / 100) for i in range(3)]
    r = evaluate_gate(base, cand, target_runs_per_week=2, budget_usd=1e6)
    assert r.criteria[0].cannot_pass and r.verdict == "FAIL"
    assert "Cannot pass: utilization_uplift" in r.summary
