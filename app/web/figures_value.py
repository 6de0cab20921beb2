"""What retraining more often buys: the cost-vs-cadence curve and the decay chart."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from app.planning.cadence_value import CadenceCost
from app.planning.decay import DecayFit, QualityPoint
from app.web.figures_base import PALETTE, REFERENCE, Figure, axis, layout, text_safe

DECAY_SAMPLES = 60
CADENCE_TICKS = {
    "tickvals": [12 / 52, 0.5, 1, 2, 3.5, 7],
    "ticktext": ["monthly", "2 weeks", "weekly", "2×/week", "3.5×/week", "daily"],
}


def _marker(point: CadenceCost, name: str, colour: str, symbol: str) -> dict[str, Any]:
    return {
        "type": "scatter",
        "mode": "markers",
        "name": name,
        "x": [point.runs_per_week],
        "y": [point.total_usd],
        "marker": {"color": colour, "size": 12, "symbol": symbol},
        "meta": REFERENCE,
        "hovertemplate": f"{name}: %{{x:.3g}} runs/week, total %{{y:$,.0f}}/month<extra></extra>",
    }


@text_safe
def cadence_curve_figure(
    curve: Sequence[CadenceCost], optimum: CadenceCost, today: CadenceCost | None
) -> Figure:
    """Retraining, staleness and total monthly USD against runs per week (log axis), with
    the optimum and today's cadence marked; extrapolated staleness is dotted."""
    xs = [c.runs_per_week for c in curve]
    hover = (
        "%{x:.3g} runs/week (every %{customdata:.1f} days): %{y:$,.0f}/month"
        "<extra>%{fullData.name}</extra>"
    )
    days = [c.interval_days for c in curve]

    def line(name: str, ys: list[float], colour: str, dash: str = "solid") -> dict[str, Any]:
        return {
            "type": "scatter",
            "mode": "lines",
            "name": name,
            "x": xs,
            "y": ys,
            "line": {"color": colour, "dash": dash, "width": 3 if dash == "solid" else 2},
            "customdata": days,
            "hovertemplate": hover,
        }

    data = [
        line("Total", [c.total_usd for c in curve], PALETTE["blue"]),
        line("Retraining", [c.retrain_usd for c in curve], PALETTE["orange"], "dash"),
        line("Staleness", [c.staleness_usd for c in curve], PALETTE["vermillion"], "dot"),
        _marker(optimum, "Optimum", PALETTE["green"], "star"),
    ]
    if today is not None:
        data.append(_marker(today, "Today", PALETTE["black"], "diamond"))
    note = (
        "Total = retraining (runs/week × weeks/month × cost per run) + staleness (value per "
        "unit × mean quality loss over a model's life)."
    )
    return {
        "data": data,
        "layout": layout(
            "cadence_value",
            "Monthly cost against retraining cadence",
            note,
            xaxis=axis("Runs per week", type="log", **CADENCE_TICKS),
            yaxis=axis("USD per month", rangemode="tozero", tickformat="$,.0f"),
        ),
    }


@text_safe
def decay_figure(
    points: Sequence[QualityPoint], fit: DecayFit, metric: str, higher_is_better: bool
) -> Figure:
    """Evaluations against model age with the fitted curve; past the oldest evaluated age
    the curve is dotted (extrapolation), and it stops at the reliable limit."""
    sign = 1.0 if higher_is_better else -1.0
    lo, hi = fit.age_range_weeks
    label = "linear" if fit.decay.model == "linear" else "saturating exponential"
    data = [_evaluations(points, metric), *_fitted(fit, sign, label)]
    note = (
        f"{fit.points} evaluations at model ages {lo * 7:.1f}-{hi * 7:.1f} days; least-squares "
        f"{label} fit, chosen by AICc; dotted beyond the oldest evaluated age."
    )
    return {
        "data": data,
        "layout": layout(
            "decay",
            f"{metric} against model age",
            note,
            xaxis=axis("Model age (days since its run finished)", rangemode="tozero"),
            yaxis=axis(metric),
        ),
    }


def _evaluations(points: Sequence[QualityPoint], metric: str) -> dict[str, Any]:
    """Each evaluation as a marker at its model age, in days."""
    return {
        "type": "scatter",
        "mode": "markers",
        "name": "Evaluations",
        "x": [p.age_weeks * 7 for p in points],
        "y": [p.value for p in points],
        "marker": {"color": PALETTE["blue"], "size": 7, "opacity": 0.7},
        # The metric by reference (customdata, escaped as text), never in the template.
        "customdata": [metric] * len(points),
        "hovertemplate": "age %{x:.1f} days: %{customdata} %{y:.4g}<extra></extra>",
    }


def _fitted(fit: DecayFit, sign: float, label: str) -> list[dict[str, Any]]:
    """The fitted curve over the evaluated ages, then dotted up to the reliable limit."""
    lo, hi = fit.age_range_weeks
    end = fit.max_reliable_age_weeks
    inside = [lo + (hi - lo) * i / (DECAY_SAMPLES - 1) for i in range(DECAY_SAMPLES)]
    beyond = [hi + (end - hi) * i / 10 for i in range(11)]
    return [
        {
            "type": "scatter",
            "mode": "lines",
            "name": f"Fit ({label})",
            "x": [a * 7 for a in inside],
            "y": [fit.predict(a, sign) for a in inside],
            "line": {"color": PALETTE["vermillion"], "width": 3},
            "hovertemplate": "fit at %{x:.1f} days: %{y:.4g}<extra></extra>",
        },
        {
            "type": "scatter",
            "mode": "lines",
            "name": "Extrapolated",
            "x": [a * 7 for a in beyond],
            "y": [fit.predict(a, sign) for a in beyond],
            "line": {"color": PALETTE["vermillion"], "width": 2, "dash": "dot"},
            "meta": REFERENCE,
            "hovertemplate": "extrapolated at %{x:.1f} days: %{y:.4g}<extra></extra>",
        },
    ]
