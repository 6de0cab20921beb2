"""Cost figures: monthly cost by cadence, GPU-time breakdowns per run and per week."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from app.planning.economics import Badput, Unit
from app.planning.projection import Projection
from app.planning.weekly import WeekSummary
from app.web.figures_base import (
    CAUSES,
    PALETTE,
    REFERENCE,
    WEEK_CAUSES,
    Figure,
    amount_axis,
    axis,
    category_axis,
    layout,
    plot_time,
    series_colour,
    text_safe,
    unique_labels,
    unit_label,
)


@dataclass(frozen=True)
class RunBadputRow:
    """One run's GPU-time breakdown for :func:`badput_by_run_figure`.

    ``badput`` is in GPU-hours (``economics.badput(run)``) or in USD
    (``badput(run).usd(price)``); it must match the figure's ``unit``.
    """

    label: str
    variant: str
    started_at: datetime
    badput: Badput


def cadence_label(runs_per_week: float) -> str:
    """1.0 -> "1×/week", 0.5 -> "0.5×/week"."""
    return f"{runs_per_week:g}×/week"


_CADENCE_HOVER = (
    "%{x}: %{y:$,.0f} expected bill"
    "<br>p10–p90 %{customdata[0]:$,.0f} – %{customdata[1]:$,.0f}"
    "<br>%{customdata[2]:.4g} runs/month × %{customdata[3]:$,.2f} mean retraining"
    "<br>%{customdata[4]:,.1f} GPU-hours per month"
    "<extra>%{fullData.name}</extra>"
)


@text_safe
def cost_projection_figure(
    projections: Mapping[str, Projection], budget_usd: float | None
) -> Figure:
    """Grouped bars of monthly cost per cadence, one trace per variant, p10–p90 error bars,
    and a dashed budget line across the whole plot when a budget is given."""
    categories: dict[str, float] = {}  # label -> runs per week, for ordering
    data: list[dict[str, Any]] = []
    for i, (variant, projection) in enumerate(projections.items()):
        xs = [cadence_label(c.runs_per_week) for c in projection.cadences]
        categories.update(
            (x, c.runs_per_week) for x, c in zip(xs, projection.cadences, strict=True)
        )
        data.append(_variant_bars(i, variant, xs, projection))
    extra: dict[str, Any] = {}
    if budget_usd is not None and categories:
        data.append(_budget_trace(budget_usd))
        extra["xaxis2"] = {"overlaying": "x", "range": [0, 1], "visible": False, "fixedrange": True}
    wpm = {p.weeks_per_month for p in projections.values()}
    month = f"{wpm.pop():.4g}" if len(wpm) == 1 else "52/12 or 4"
    note = (
        f"Expected bill = runs per week × {month} weeks per month × the mean retraining cost "
        "(failed attempts included); error bars are the p10–p90 of the simulated months' bills."
    )
    return {
        "data": data,
        "layout": layout(
            "cost_projection",
            "Expected bill by cadence",
            note,
            barmode="group",
            xaxis=axis(
                "Cadence (runs per week)",
                type="category",
                categoryorder="array",
                categoryarray=sorted(categories, key=categories.__getitem__),
            ),
            yaxis=axis("USD per month", tickformat="$,.0f", rangemode="tozero"),
            **extra,
        ),
    }


def _variant_bars(
    index: int, variant: str, xs: list[str], projection: Projection
) -> dict[str, Any]:
    """One variant's bars: the expected bill per cadence, its p10–p90 as error bars."""
    cads = projection.cadences
    ys = [c.monthly_cost_usd for c in cads]
    return {
        "type": "bar",
        "name": variant,
        "x": xs,
        "y": ys,
        "marker": {"color": series_colour(index)},
        "error_y": {
            "type": "data",
            "symmetric": False,
            "array": [max(0.0, c.monthly_cost_p90_usd - y) for c, y in zip(cads, ys, strict=True)],
            "arrayminus": [
                max(0.0, y - c.monthly_cost_p10_usd) for c, y in zip(cads, ys, strict=True)
            ],
            "color": PALETTE["black"],
            "thickness": 1.2,
        },
        "customdata": [
            [
                c.monthly_cost_p10_usd,
                c.monthly_cost_p90_usd,
                c.runs_per_month,
                c.mean_cost_per_run_usd,
                c.monthly_gpu_hours,
            ]
            for c in cads
        ],
        "hovertemplate": _CADENCE_HOVER,
    }


def budget_name(budget_usd: float) -> str:
    """The budget line's legend entry: 1400 -> "Budget $1,400/month"."""
    return f"Budget ${budget_usd:,.0f}/month"


def _budget_trace(budget_usd: float) -> dict[str, Any]:
    # On a hidden overlaying x axis spanning [0, 1], so the line runs edge to edge even
    # with a single cadence category.
    return {
        "type": "scatter",
        "mode": "lines",
        "name": budget_name(budget_usd),
        "x": [0, 1],
        "y": [budget_usd, budget_usd],
        "xaxis": "x2",
        "line": {"color": PALETTE["black"], "dash": "dash", "width": 2},
        "hovertemplate": "Budget: %{y:$,.0f} per month<extra></extra>",
        "meta": REFERENCE,
    }


def _breakdown_traces(
    x: list[str],
    amounts: Sequence[Mapping[str, float]],
    value_format: str,
    customdata: Sequence[list[Any]],
    detail: str,
    causes: Sequence[tuple[str, str, str]] = CAUSES,
) -> list[dict[str, Any]]:
    totals = [sum(a.get(key, 0.0) for key, _, _ in causes) for a in amounts]
    share = len(customdata[0]) if customdata else 0  # the share goes after the caller's columns
    traces = []
    for key, name, colour in causes:
        ys = [float(a.get(key, 0.0)) for a in amounts]
        shares = [y / t if t > 0 else 0.0 for y, t in zip(ys, totals, strict=True)]
        traces.append(
            {
                "type": "bar",
                "name": name,
                "x": x,
                "y": ys,
                "marker": {"color": colour},
                "customdata": [[*c, s] for c, s in zip(customdata, shares, strict=True)],
                "hovertemplate": f"%{{x}}<br>{name}: {value_format} "
                f"(%{{customdata[{share}]:.1%}} of the total){detail}<extra></extra>",
            }
        )
    return traces


@text_safe
def badput_by_run_figure(rows: Sequence[RunBadputRow], unit: Unit) -> Figure:
    """Stacked bars per run: productive time plus the four causes of idle GPU time."""
    unit_name, value_format = unit_label(unit)
    for row in rows:
        if row.badput.unit != unit:
            raise ValueError(f"run {row.label!r} has a breakdown in {row.badput.unit}, not {unit}")
    amounts = [{key: float(getattr(r.badput, key)) for key, _, _ in CAUSES} for r in rows]
    customdata: list[list[Any]] = [[r.variant, plot_time(r.started_at)] for r in rows]
    labels = unique_labels(r.label for r in rows)
    data = _breakdown_traces(
        labels,
        amounts,
        value_format,
        customdata,
        "<br>variant %{customdata[0]}, started %{customdata[1]} UTC",
    )
    note = (
        "Productive = utilization × GPU-hours; each cause = its wall-clock hours × GPU-hours / "
        "wall clock; other idle = (1 − utilization) × GPU-hours − named causes, never negative."
    )
    return {
        "data": data,
        "layout": layout(
            f"badput_by_run_{unit}",
            f"{unit_name} per run, by cause",
            note,
            barmode="stack",
            xaxis=category_axis("Run", labels),
            yaxis=amount_axis(f"{unit_name} per run", unit),
        ),
    }


@text_safe
def badput_by_week_figure(weeks: Sequence[WeekSummary], unit: Unit) -> Figure:
    """Stacked bars per ISO week (productive, four causes of idle time and failed
    attempts); weeks without runs are zero."""
    unit_name, value_format = unit_label(unit)
    amounts = [w.gpu_hours_by_cause if unit == "gpu_hours" else w.usd_by_cause for w in weeks]
    data = _breakdown_traces(
        [w.week for w in weeks],
        amounts,
        value_format,
        [[w.runs] for w in weeks],
        "<br>attempts this week: %{customdata[0]}",
        WEEK_CAUSES,
    )
    note = (
        "Per ISO week (Monday first), the sum over attempts started that week of productive = "
        "utilization × GPU-hours and of each cause of idle time; failed attempts = every "
        "GPU-hour of attempts that did not succeed; weeks without runs show zero."
    )
    return {
        "data": data,
        "layout": layout(
            f"badput_by_week_{unit}",
            f"{unit_name} per week, by cause",
            note,
            barmode="stack",
            xaxis=axis("ISO week", type="category"),
            yaxis=amount_axis(f"{unit_name} per week", unit),
        ),
    }
