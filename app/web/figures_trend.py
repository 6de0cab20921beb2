"""Trend figures: weekly goodput, and utilization and quality per run over time."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from app.planning.goodput import program_basis
from app.planning.weekly import WeekSummary
from app.web.figures_base import (
    PALETTE,
    Figure,
    axis,
    finite_or_none,
    layout,
    plot_time,
    series_colour,
    text_safe,
)

# Round ticks (0, 25, 50, 75, 100%): left to Plotly, a short panel got 0/31/62/94%.
PERCENT_AXIS = {"tickformat": ".0%", "range": [0, 1.05], "tick0": 0, "dtick": 0.25}
# The goodput chart's program line, by what measured it (planning.goodput.program_basis).
PROGRAM_NAMES = {
    "mfu": "Program (MFU)",
    "utilization": "Program (utilization proxy)",
    "mixed": "Program (MFU; utilization where runs report none)",
}


@dataclass(frozen=True)
class RunPoint:
    """One run on the utilization/quality chart. ``utilization`` is a fraction in [0, 1];
    ``quality`` is the pipeline's quality metric, None when the run reported none."""

    started_at: datetime
    variant: str
    utilization: float
    quality: float | None
    run_id: str


@text_safe
def goodput_trend_figure(weeks: Sequence[WeekSummary]) -> Figure:
    """Scheduling, runtime, program and overall goodput per ISO week (gaps where no runs)."""
    basis = program_basis(sum(w.mfu_gpu_hours for w in weeks), sum(w.gpu_hours for w in weeks))
    program = PROGRAM_NAMES[basis]
    series = (
        ("Scheduling", "scheduling", PALETTE["sky"], "dot"),
        ("Runtime", "runtime", PALETTE["orange"], "dash"),
        (program, "program", PALETTE["purple"], "dashdot"),
        ("Overall", "overall", PALETTE["black"], "solid"),
    )
    x = [w.week for w in weeks]
    data = [
        {
            "type": "scatter",
            "mode": "lines+markers",
            "name": name,
            "x": x,
            "y": [finite_or_none(getattr(w.goodput, field)) for w in weeks],
            "customdata": [w.runs for w in weeks],
            "connectgaps": False,
            "line": {"color": colour, "dash": dash, "width": 3 if field == "overall" else 2},
            "hovertemplate": "%{y:.1%} (runs: %{customdata})<extra>%{fullData.name}</extra>",
        }
        for name, field, colour, dash in series
    ]
    note = (
        "GPU-hour weighted per ISO week: scheduling = (period − queue − reschedule) / period, "
        "runtime = (held − resume − lost progress − blocking checkpoints) / held, "
        "program = MFU (else utilization), overall = scheduling × runtime × program."
    )
    return {
        "data": data,
        "layout": layout(
            "goodput_trend",
            "Goodput by week",
            note,
            hovermode="x unified",
            xaxis=axis("ISO week", type="category"),
            yaxis=axis("Goodput (% of paid GPU time)", **PERCENT_AXIS),
        ),
    }


@text_safe
def utilization_quality_figure(points: Sequence[RunPoint], quality_metric: str) -> Figure:
    """Two stacked panels sharing the time axis: utilization (top) and the quality metric
    (bottom) per run, one trace per variant in each, same colour per variant."""
    by_variant: dict[str, list[RunPoint]] = {}
    for p in points:
        by_variant.setdefault(p.variant, []).append(p)
    metric = quality_metric or "Quality"
    data: list[dict[str, Any]] = []
    for i, (variant, runs) in enumerate(by_variant.items()):
        runs = sorted(runs, key=lambda p: plot_time(p.started_at))
        style = {
            "type": "scatter",
            "mode": "lines+markers",
            "name": variant,
            "legendgroup": f"variant-{i}",
            "line": {"color": series_colour(i), "width": 2},
            "marker": {"color": series_colour(i), "size": 7},
        }
        rated = [p for p in runs if finite_or_none(p.quality) is not None]
        data.append(
            {
                **style,
                "x": [plot_time(p.started_at) for p in runs],
                "y": [finite_or_none(p.utilization) for p in runs],
                "customdata": [p.run_id for p in runs],
                "hovertemplate": "Run %{customdata}<br>%{x|%Y-%m-%d %H:%M} UTC"
                "<br>utilization %{y:.1%}<extra>%{fullData.name}</extra>",
            }
        )
        data.append(
            {
                **style,
                "showlegend": False,
                "yaxis": "y2",
                "x": [plot_time(p.started_at) for p in rated],
                "y": [p.quality for p in rated],
                "customdata": [[p.run_id, metric] for p in rated],
                "hovertemplate": "Run %{customdata[0]}<br>%{x|%Y-%m-%d %H:%M} UTC"
                "<br>%{customdata[1]}: %{y:.4g}<extra>%{fullData.name}</extra>",
            }
        )
    note = (
        "Top: each run's time-averaged GPU busy fraction; bottom: its reported "
        f"{metric} (runs without one are left out); x is the run's start time (UTC)."
    )
    return {
        "data": data,
        "layout": layout(
            "utilization_quality",
            f"Utilization and {metric}",
            note,
            xaxis=axis("Run start (UTC)", type="date", anchor="y2"),
            yaxis=axis("GPU utilization (%)", domain=[0.55, 1.0], **PERCENT_AXIS),
            yaxis2=axis(metric, domain=[0.0, 0.45], anchor="x"),
        ),
    }


@text_safe
def review_trend_figure(weeks: Sequence[WeekSummary]) -> Figure:
    """Spend (bars, left axis) and overall goodput (line, right axis) per ISO week."""
    x = [w.week for w in weeks]
    data = [
        {
            "type": "bar",
            "name": "Spend",
            "x": x,
            "y": [w.cost_usd for w in weeks],
            "marker": {"color": PALETTE["sky"]},
            "hovertemplate": "%{y:$,.0f}<extra>Spend</extra>",
        },
        {
            "type": "scatter",
            "mode": "lines+markers",
            "name": "Goodput",
            "x": x,
            "y": [finite_or_none(w.goodput.overall) for w in weeks],
            "yaxis": "y2",
            "connectgaps": False,
            "line": {"color": PALETTE["black"], "width": 3},
            "hovertemplate": "%{y:.1%}<extra>Goodput</extra>",
        },
    ]
    note = (
        "Spend = GPU-hours × price of the week's runs; goodput = scheduling × runtime × "
        "program, GPU-hour weighted over all the pipelines shown (weeks are ISO weeks, UTC)."
    )
    return {
        "data": data,
        "layout": layout(
            "review_trend",
            f"Spend and goodput, last {len(weeks)} weeks",
            note,
            hovermode="x unified",
            xaxis=axis("ISO week", type="category"),
            yaxis=axis("Spend per week", rangemode="tozero", tickformat="$,.0f"),
            yaxis2=axis("Goodput", overlaying="y", side="right", **PERCENT_AXIS),
        ),
    }
