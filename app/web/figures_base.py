"""Shared pieces of the figure builders: palette, layout, units, JSON and emptiness checks.

Figures are plain ``{"data": [...], "layout": {...}}`` dicts for Plotly.js
(``Plotly.react(el, fig.data, fig.layout, config)``). Nothing here imports plotly.
"""

from __future__ import annotations

import functools
import html
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, ParamSpec

from app.planning.causes import CAUSE_LABELS, IDLE_CAUSES
from app.planning.economics import Unit

Figure = dict[str, Any]

PALETTE: dict[str, str] = {
    "blue": "#0072B2",
    "orange": "#E69F00",
    "green": "#009E73",
    "vermillion": "#D55E00",
    "purple": "#CC79A7",
    "sky": "#56B4E9",
    "yellow": "#F0E442",
    "black": "#000000",
    "grey": "#999999",
}
"""Okabe & Ito (2008) colour-blind-safe palette, plus the neutral grey of its common variant."""

SERIES_COLOURS: tuple[str, ...] = tuple(
    PALETTE[name] for name in ("blue", "orange", "green", "vermillion", "purple", "sky", "black")
)
"""Colours for one-trace-per-series charts (variants), in order; yellow is left out because
it is hard to read as a thin line on white."""

CAUSE_COLOURS: dict[str, str] = {
    "productive": PALETTE["green"],
    "data_stall": PALETTE["orange"],
    "checkpoint": PALETTE["sky"],
    "failure": PALETTE["vermillion"],
    "other_idle": PALETTE["grey"],
    "failed": PALETTE["purple"],
}
"""Each cause of badput (app.planning.causes) and the productive time, in one colour."""

CAUSES: tuple[tuple[str, str, str], ...] = (
    ("productive", "Productive", CAUSE_COLOURS["productive"]),
    *((c, CAUSE_LABELS[c], CAUSE_COLOURS[c]) for c in IDLE_CAUSES),
)
"""Stack order of a GPU-time breakdown: (Badput field / by-cause key, label, colour)."""

WEEK_CAUSES: tuple[tuple[str, str, str], ...] = (
    *CAUSES,
    ("failed", CAUSE_LABELS["failed"], CAUSE_COLOURS["failed"]),
)
"""A week's breakdown adds the attempts that did not succeed (all their GPU time); a
single run's (a planning window's succeeded attempt) has no such share."""

UNIT_LABELS: dict[str, tuple[str, str]] = {
    "gpu_hours": ("GPU-hours", "%{y:,.1f} GPU-hours"),
    "usd": ("USD", "%{y:$,.2f}"),
}
"""unit -> (axis unit, hover value format)."""

REFERENCE = {"role": "reference"}
"""Trace ``meta`` marking a reference line (budget, ideal, markers): not data for has_data."""


def series_colour(index: int) -> str:
    return SERIES_COLOURS[index % len(SERIES_COLOURS)]


def unit_label(unit: Unit) -> tuple[str, str]:
    """(axis unit, hover value format) for ``unit``; ValueError for anything else."""
    try:
        return UNIT_LABELS[unit]
    except KeyError:
        raise ValueError(f"unit must be one of {sorted(UNIT_LABELS)}, got {unit!r}") from None


def amount_axis(title: str, unit: Unit) -> dict[str, Any]:
    """A y axis of GPU-hours or USD (dollar tick labels), starting at zero."""
    dollars = {"tickformat": "$,.0f"} if unit == "usd" else {}
    return axis(title, rangemode="tozero", **dollars)


def axis(title: str, **extra: Any) -> dict[str, Any]:
    """An axis with a title and automatic margins."""
    return {"title": {"text": title}, "automargin": True, **extra}


def layout(kind: str, title: str, note: str, **extra: Any) -> dict[str, Any]:
    """The common layout: left-aligned title, compact margins, no fixed size, and ``meta`` =
    {"kind": stable id, "note": how the numbers are computed}.

    The horizontal legend sits at the bottom of the *container* (``legend.yref``, Plotly.js
    >= 2.23): the bottom margin then grows to fit it below the x-axis title, so they never
    overlap, however many rows the legend wraps into.
    """
    base: dict[str, Any] = {
        "title": {"text": title, "x": 0, "xanchor": "left", "yref": "container", "y": 0.98},
        "autosize": True,
        "margin": {"l": 56, "r": 24, "t": 40, "b": 40, "pad": 2},
        "legend": {
            "orientation": "h",
            "x": 0,
            "xanchor": "left",
            "yref": "container",
            "y": 0,
            "yanchor": "bottom",
        },
        "hovermode": "closest",
        "colorway": list(SERIES_COLOURS),
        "font": {"family": "system-ui, -apple-system, 'Segoe UI', sans-serif", "size": 12},
        "paper_bgcolor": "#ffffff",
        "plot_bgcolor": "#ffffff",
        "meta": {"kind": kind, "note": note},
    }
    base.update(extra)
    return base


def finite_or_none(value: float | None) -> float | None:
    """``value`` as a float, or None when missing, NaN or infinite."""
    if value is None or not math.isfinite(value):
        return None
    return float(value)


def plot_time(moment: datetime) -> str:
    """A datetime as Plotly date text in UTC (Plotly.js ignores time-zone offsets).

    Aware datetimes are converted to UTC; naive ones are taken to be UTC already.
    """
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC).replace(tzinfo=None)
    return moment.isoformat(sep=" ", timespec="seconds")


def unique_labels(labels: Iterable[str]) -> list[str]:
    """Labels made distinct for a categorical axis: repeats get " (2)", " (3)", ..."""
    seen: dict[str, int] = {}
    out = []
    for label in labels:
        count = seen.get(label, 0) + 1
        seen[label] = count
        out.append(label if count == 1 else f"{label} ({count})")
    return out


TICK_CHARS = 12  # a UUID tick then takes ~80 px, and 26 of them fit at 1280 px


def short_label(label: str, limit: int = TICK_CHARS) -> str:
    """A tick label of at most ``limit`` characters: head…tail of a longer one.

    The tail is kept because run ids that differ only at the end (dates, counters, the
    " (2)" of a repeat) must stay distinguishable; hovering shows the full label.
    """
    if len(label) <= limit:
        return label
    tail = (limit - 1) // 2
    return label[: limit - 1 - tail] + "…" + label[-tail:]


def category_axis(title: str, labels: Sequence[str]) -> dict[str, Any]:
    """A categorical x axis whose ticks are shortened labels (the data keeps the full ones).

    Long labels (36-character UUIDs) made Plotly's automatic margins eat the plot area
    at 1280 px until it threw "Something went wrong with axis scaling".
    """
    return axis(
        title,
        type="category",
        tickmode="array",
        tickvals=list(labels),
        ticktext=[short_label(label) for label in labels],
    )


def has_data(fig: Mapping[str, Any]) -> bool:
    """True when the figure has something worth drawing.

    Reference traces (budget line, ideal speedup, interval markers; trace ``meta.role`` ==
    "reference") don't count. A data trace counts when it has a finite y value; for bars
    the value must also be non-zero (a zero-height bar draws nothing, e.g. a week without
    runs). When False, show an explanatory empty state instead of the chart.
    """
    for trace in fig.get("data", []):
        meta = trace.get("meta")
        if isinstance(meta, Mapping) and meta.get("role") == "reference":
            continue
        is_bar = trace.get("type") == "bar"
        for y in trace.get("y", []):
            if isinstance(y, bool) or not isinstance(y, int | float) or not math.isfinite(y):
                continue
            if not is_bar or y != 0:
                return True
    return False


# --- user text as text --------------------------------------------------------------------
# Plotly.js renders a subset of HTML in every text it draws (titles, axis titles and ticks,
# legend and trace names, hover text, annotations): <a href> becomes a link, <b> and <i>
# render. A variant or metric name is text, so every such string is written with "<", ">"
# and "&" as entities, which Plotly shows literally. Hover *templates* are ours (their
# <br> and <extra> are meant) and insert data by reference, already escaped here.
TRACE_TEXT = ("name", "text", "hovertext", "x", "y", "customdata", "ids")
TITLED = ("title", "legendgrouptitle")
P = ParamSpec("P")


def plain(value: Any) -> Any:
    """``value`` with every string in it (lists nested) escaped for Plotly's markup."""
    if isinstance(value, str):
        return html.escape(value, quote=False)
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def _plain_titles(part: dict[str, Any]) -> None:
    for key in TITLED:
        title = part.get(key)
        if isinstance(title, str):
            part[key] = plain(title)
        elif isinstance(title, dict) and "text" in title:
            title["text"] = plain(title["text"])


def plain_figure(fig: Figure) -> Figure:
    """Escape, in place, every text field of ``fig`` that Plotly would read as markup."""
    for trace in fig.get("data", []):
        for key in TRACE_TEXT:
            if key in trace:
                trace[key] = plain(trace[key])
        _plain_titles(trace)
    layout_part = fig.get("layout", {})
    _plain_titles(layout_part)
    if isinstance(layout_part.get("legend"), dict):
        _plain_titles(layout_part["legend"])
    for note in layout_part.get("annotations", []):
        note["text"] = plain(note.get("text", ""))
    for key, part in layout_part.items():
        if key.startswith(("xaxis", "yaxis")) and isinstance(part, dict):
            _plain_titles(part)
            for ticks in ("ticktext", "tickvals", "categoryarray"):
                if ticks in part:
                    part[ticks] = plain(part[ticks])
    return fig


def text_safe(builder: Callable[P, Figure]) -> Callable[P, Figure]:
    """A figure builder whose figures show user strings as text (see :func:`plain_figure`)."""

    @functools.wraps(builder)
    def build(*args: P.args, **kwargs: P.kwargs) -> Figure:
        return plain_figure(builder(*args, **kwargs))

    return build
