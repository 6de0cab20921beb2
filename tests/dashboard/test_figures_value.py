"""Figures of "What retraining more often buys" (pure builders)."""

from __future__ import annotations

import pytest

from app.dashboard.figures_base import has_data, to_json
from app.dashboard.figures_value import cadence_curve_figure, decay_figure
from app.planning.cadence_value import cadence_value
from app.planning.decay import Decay, QualityPoint, fit_decay


def test_curve_figure_marks_optimum_and_today() -> None:
    v = cadence_value(
        Decay("linear", 0.004), value_usd_per_unit_month=200_000, cost_per_run_usd=280,
        weeks_per_month=52 / 12, wall_clock_hours=14, today_runs_per_week=1,
    )  # fmt: skip
    fig = cadence_curve_figure(v.curve, v.optimum, v.today)
    names = [t["name"] for t in fig["data"]]
    assert names == ["Total", "Retraining", "Staleness", "Optimum", "Today"]
    total = fig["data"][0]
    # Every total is the sum of its retraining and staleness.
    for t, r, s in zip(total["y"], fig["data"][1]["y"], fig["data"][2]["y"], strict=True):
        assert t == pytest.approx(r + s)
    assert fig["data"][3]["x"] == [pytest.approx(0.574170, abs=1e-6)]
    assert fig["data"][4]["y"] == [pytest.approx(1613.33, abs=0.01)]  # weekly: 1213.33 + 400
    assert fig["layout"]["xaxis"]["type"] == "log" and has_data(fig)
    assert fig["layout"]["meta"]["kind"] == "cadence_value"


def test_decay_figure_shows_points_fit_and_dotted_extrapolation() -> None:
    points = [QualityPoint(a, 0.8 - 0.004 * a) for a in (0, 1, 2, 3)]
    fit = fit_decay(points)
    fig = decay_figure(points, fit, "auc</script>", higher_is_better=True)
    evaluations, line, beyond = fig["data"]
    assert evaluations["x"] == [0, 7, 14, 21]  # ages in days
    assert line["y"][0] == pytest.approx(0.8) and line["y"][-1] == pytest.approx(0.788)
    # Dotted from the oldest age (3 weeks) to 1.5x it (4.5 weeks = 31.5 days).
    assert beyond["line"]["dash"] == "dot" and beyond["x"][-1] == pytest.approx(31.5)
    assert "</script>" not in to_json(fig)
