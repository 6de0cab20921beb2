"""Pure builders of Plotly figure dicts for the dashboard pages.

Each builder takes planning results (``app.planning``) and returns a JSON-serialisable
``{"data": [...], "layout": {...}}`` for ``Plotly.react(el, fig.data, fig.layout, config)``.
Every layout carries ``meta.kind`` (a stable id) and ``meta.note`` (one sentence on how the
numbers are computed, to show under the chart). Embed figures with :func:`to_json`; check
:func:`has_data` first and show an explanatory empty state instead of an empty chart.
User strings (variant, run, metric names) are passed to Plotly as-is, never as HTML.
"""

from __future__ import annotations

from app.templating import to_json
from app.web.figures_base import (
    CAUSES,
    PALETTE,
    SERIES_COLOURS,
    Figure,
    has_data,
)
from app.web.figures_cost import (
    RunBadputRow,
    badput_by_run_figure,
    badput_by_week_figure,
    cadence_label,
    cost_projection_figure,
)
from app.web.figures_scaling import checkpoint_figure, scaling_figure
from app.web.figures_trend import RunPoint, goodput_trend_figure, utilization_quality_figure

__all__ = [
    "CAUSES",
    "PALETTE",
    "SERIES_COLOURS",
    "Figure",
    "RunBadputRow",
    "RunPoint",
    "badput_by_run_figure",
    "badput_by_week_figure",
    "cadence_label",
    "checkpoint_figure",
    "cost_projection_figure",
    "goodput_trend_figure",
    "has_data",
    "scaling_figure",
    "to_json",
    "utilization_quality_figure",
]
