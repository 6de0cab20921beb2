"""The forecast's record as a chart: the forecast band (p10-p90) and the expected bill
against what each month cost (pure: scored months in, a Plotly figure dict out)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from app.planning.record import ScoredMonth
from app.web.figures_base import PALETTE, Figure, amount_axis, axis, layout, text_safe

BAND_FILL = "rgba(0, 114, 178, 0.18)"  # the palette's blue, light


@text_safe
def record_figure(months: Sequence[ScoredMonth]) -> Figure:
    """Month by month, oldest first: the p10-p90 band as a shaded area, the expected bill
    dashed, and the bill as markers (vermillion when it went above the p90)."""
    shown = sorted(months, key=lambda m: m.forecast.month)
    xs = [m.forecast.month.strftime("%b %Y") for m in shown]
    data = [*_forecast_traces(shown, xs), _bill_trace(shown, xs)]
    note = (
        "Each month's forecast as made at its start (recorded, or backtested from the runs "
        "that had started before it) against what the month cost; an x marks a bill above "
        "the p90."
    )
    return {
        "data": data,
        "layout": layout(
            "forecast_record",
            "The forecast band against the bill, month by month",
            note,
            xaxis=axis("Month", type="category"),
            yaxis=amount_axis("USD per month", "usd"),
        ),
    }


def _forecast_traces(shown: Sequence[ScoredMonth], xs: list[str]) -> list[dict[str, Any]]:
    """The band (the p90 line filled down to the p10 line, both unseen) and the expected
    bill, dashed, saying whether each month's forecast was recorded or backtested."""
    how = ["backtest" if m.forecast.source == "backtest" else "recorded" for m in shown]

    def line(name: str, ys: list[float], **style: Any) -> dict[str, Any]:
        return {"type": "scatter", "mode": "lines", "name": name, "x": xs, "y": ys, **style}

    return [
        line(
            "p10",
            [m.forecast.bill_p10_usd for m in shown],
            line={"width": 0},
            showlegend=False,
            hoverinfo="skip",
        ),
        line(
            "Forecast band (p10 to p90)",
            [m.forecast.bill_p90_usd for m in shown],
            line={"width": 0},
            fill="tonexty",
            fillcolor=BAND_FILL,
            hoverinfo="skip",
        ),
        line(
            "Expected bill",
            [m.forecast.expected_bill_usd for m in shown],
            mode="lines+markers",
            line={"color": PALETTE["blue"], "dash": "dash", "width": 2},
            customdata=how,
            hovertemplate="%{x}: expected %{y:$,.0f} (%{customdata})<extra></extra>",
        ),
    ]


def _bill_trace(shown: Sequence[ScoredMonth], xs: list[str]) -> dict[str, Any]:
    """What each month cost, as markers: an x in vermillion above the forecast's p90."""
    return {
        "type": "scatter",
        "mode": "markers",
        "name": "The bill",
        "x": xs,
        "y": [m.actual_usd for m in shown],
        "marker": {
            "size": 10,
            "color": [PALETTE["vermillion"] if m.p90_exceeded else PALETTE["black"] for m in shown],
            "symbol": ["x" if m.p90_exceeded else "circle" for m in shown],
        },
        "hovertemplate": "%{x}: %{y:$,.0f}<extra>%{fullData.name}</extra>",
    }
