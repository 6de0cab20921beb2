"""The cost-optimal cadence (methodology.md §11), checked against hand-worked numbers."""

from __future__ import annotations

import math
from typing import Any

import pytest

from app.planning.cadence_value import (
    DAILY,
    MONTHLY,
    CadenceValue,
    cadence_value,
    cost_at,
    headline,
    linear_optimum,
)
from app.planning.decay import Decay
from app.planning.model import PlanningError

WPM = 52 / 12


def worked(
    decay: Decay | None = None, *, value: float = 200_000, hours: float = 14, **more: Any
) -> CadenceValue:
    """The worked numbers: $200,000 a unit-month, $280 and 14 h a run, 52/12 weeks a
    month, linear decay of 0.004 a week unless another decay is given."""
    return cadence_value(
        decay or Decay("linear", 0.004),
        value_usd_per_unit_month=value,
        cost_per_run_usd=280,
        weeks_per_month=WPM,
        wall_clock_hours=hours,
        **more,
    )


def test_domain_section_8_worked_check() -> None:
    # V = $200,000 per AUC-month, b = 0.004 AUC/week, wpm = 52/12, c = $280:
    # k* = sqrt(V b / (2 wpm c)) = sqrt(800 / (2 x 4.3333 x 280)) = sqrt(800 / 2426.67)
    #    = sqrt(0.329670) = 0.574170 runs/week, an interval of 7 / 0.57417 = 12.19 days.
    k = linear_optimum(200_000, 0.004, WPM, 280)
    assert k == pytest.approx(0.574170, abs=1e-6)
    # At k = 2: staleness = V b / (2k) = 200000 x 0.004 / 4 = $200;
    # retraining = 2 x 4.3333 x 280 = $2,426.67.
    at2 = cost_at(2.0, Decay("linear", 0.004), 200_000, WPM, 280)
    assert at2.staleness_usd == pytest.approx(200.0)
    assert at2.retrain_usd == pytest.approx(2426.6667, abs=1e-3)
    assert at2.total_usd == pytest.approx(2626.6667, abs=1e-3)


def test_the_whole_answer_for_the_worked_numbers() -> None:
    out = worked(budget_usd=None, today_runs_per_week=1)
    assert out.optimum.runs_per_week == pytest.approx(0.574170, abs=1e-6)
    # At k*: retrain = 0.57417 x 4.3333 x 280 = $696.66; staleness = 800 / (2 x 0.57417)
    # = $696.66 (equal at the optimum of a k + b/k); total 2 sqrt(400 x 1213.33) = $1,393.32.
    assert out.optimum.retrain_usd == pytest.approx(out.optimum.staleness_usd)
    assert out.optimum.total_usd == pytest.approx(2 * math.sqrt(800 / 2 * WPM * 280), rel=1e-9)
    assert out.optimum.total_usd == pytest.approx(1393.32, abs=0.01)
    # Weekly: 1213.33 + 400 = $1,613.33, so the optimum saves $220.02 a month.
    assert out.weekly.total_usd == pytest.approx(1613.33, abs=0.01)
    assert out.saving_vs_weekly_usd == pytest.approx(220.02, abs=0.01)
    assert out.sentence == "Retraining every 12 days minimises cost: $220/month less than weekly."
    # Half and double the value move k* by 1/sqrt(2) and sqrt(2): sqrt(400 / 2426.67) =
    # 0.405999 and sqrt(1600 / 2426.67) = 0.811998.
    assert out.optimum_at_half_value == pytest.approx(0.405999, abs=2e-6)
    assert out.optimum_at_double_value == pytest.approx(0.811998, abs=2e-6)
    assert out.today is not None and out.today.total_usd == pytest.approx(out.weekly.total_usd)
    assert out.curve[0].runs_per_week == pytest.approx(MONTHLY)
    assert out.curve[-1].runs_per_week == pytest.approx(DAILY)


def test_budget_and_run_length_limit_the_feasible_cadence() -> None:
    # Value 10x: k* = sqrt(8000 / 2426.67) = 1.8157/week. A budget of $1,000 allows
    # retrain(k) <= 1000, k <= 1000 / (4.3333 x 280) = 0.82418/week; total is convex, so
    # the best feasible cadence is that cap.
    out = worked(value=2_000_000, budget_usd=1000)
    assert out.optimum.runs_per_week == pytest.approx(1.81568, abs=1e-5)
    assert out.best_feasible is not None
    assert out.best_feasible.runs_per_week == pytest.approx(0.824176, abs=1e-6)
    # A 100-hour run allows at most 168 / 100 = 1.68 runs/week.
    long = worked(value=2_000_000, hours=100)
    assert long.max_runs_per_week == pytest.approx(1.68)
    assert long.best_feasible is not None and long.best_feasible.runs_per_week == pytest.approx(
        1.68
    )
    # A budget below one monthly run's cost (4.3333 x 280 x 12/52 = $280) leaves nothing.
    broke = worked(budget_usd=100)
    assert broke.best_feasible is None and any("exceeds the budget" in n for n in broke.notes)


def test_exponential_optimum_is_found_numerically() -> None:
    # Exponential with tau = 2 weeks and amplitude 0.02: mean loss over I weeks is
    # A (1 - (tau/I)(1 - exp(-I/tau))). At I = 1 week: 0.02 (1 - 2 (1 - e^-0.5))
    # = 0.02 x (1 - 0.786939) = 0.0042612.
    decay = Decay("exponential", 0.01, amplitude=0.02, tau_weeks=2.0)
    assert decay.mean_loss(1.0) == pytest.approx(0.0042612, abs=1e-7)
    out = worked(decay)
    # The grid optimum is a true local minimum: neighbours cost more.
    k = out.optimum.runs_per_week
    for other in (k * 0.98, k * 1.02):
        assert cost_at(other, decay, 200_000, WPM, 280).total_usd > out.optimum.total_usd
    # Near age 0 the exponential loses A / tau = 0.01 per week, like a line of b = 0.01;
    # it saturates, so it can never cost more in staleness than that line.
    line = cost_at(k, Decay("linear", 0.01), 200_000, WPM, 280)
    assert out.optimum.staleness_usd < line.staleness_usd


def test_no_decay_means_monthly_and_a_plain_sentence() -> None:
    out = worked(Decay("linear", -0.001))
    assert out.optimum.runs_per_week == pytest.approx(MONTHLY)
    assert out.optimum.staleness_usd == 0.0
    assert any("No decay" in n for n in out.notes)
    assert headline(out.weekly, 0.0).startswith("Retraining weekly already")


def test_far_extrapolation_is_flagged() -> None:
    out = worked(max_reliable_age_weeks=1.5)
    # k* = 0.574 -> an interval of 1.74 weeks > 1.5: flagged, with a note.
    assert out.optimum.extrapolated
    assert any("extrapolation" in n for n in out.notes)
    assert not out.curve[-1].extrapolated  # daily: 1/7 week, well inside


def test_bad_inputs_are_refused() -> None:
    with pytest.raises(PlanningError):
        worked(value=-1)
    with pytest.raises(PlanningError):
        Decay("exponential", 0.01, amplitude=0.02, tau_weeks=0.0)


def test_what_the_proposed_cadence_buys() -> None:
    # methodology.md §11.2's check: V = $200,000 per AUC-month, b = 0.004 AUC/week,
    # wpm = 52/12, c = $280. Today 1/week: retraining 4.333 x 280 = $1,213.33, staleness
    # V x b / (2k) = $400. Proposed 2/week: $2,426.67 and $200. So $1,213 more in
    # retraining, $200 less in staleness, $1,013 a month more in all.
    from app.planning.cadence_value import cadence_value, proposed_words
    from app.planning.decay import Decay

    decay = Decay(model="linear", rate_per_week=0.004)
    v = cadence_value(
        decay, value_usd_per_unit_month=200_000.0, cost_per_run_usd=280.0,
        weeks_per_month=52 / 12, wall_clock_hours=14.0, today_runs_per_week=1.0,
        proposed_runs_per_week=2.0,
    )  # fmt: skip
    assert v.proposed is not None and abs(v.proposed.staleness_usd - 200.0) < 1e-6
    assert abs(v.proposed.retrain_usd - 2426.6667) < 1e-3
    assert v.proposed_sentence == (
        "Retraining 2×/week instead of today's 1×/week costs $1,213 more in retraining and "
        "$200 less in staleness: $1,013 a month more in all."
    )
    assert proposed_words(v.today, v.today) is None  # the same cadence: nothing to say
