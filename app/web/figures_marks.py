"""Change points marked on the charts whose x axis is time (pure): a dashed vertical line
where a declared change or a price change took effect, with its words on hover and a
short label at the top, on the per-run cost chart and the weekly goodput chart.

Both charts have category axes (one category per run or per ISO week), so a change is
placed by position: between the last run before it and the first run after it, or
inside its week in proportion to the days gone.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

from app.web.figures_base import PALETTE, Figure, plain

LABEL_CHARS = 28


@dataclass(frozen=True)
class Mark:
    """A change to draw: when it took effect and what it was."""

    at: datetime
    description: str


def run_position(starts: Sequence[datetime], at: datetime) -> float | None:
    """Between the runs started before ``at`` and those at or after it (category index
    minus a half); None when the change is older than every run shown."""
    if not starts or at < starts[0]:
        return None
    return bisect_left(starts, at) - 0.5


def week_position(mondays: Sequence[date], at: datetime) -> float | None:
    """Inside the ISO week that holds ``at``, by the share of the week gone (week i spans
    i - 0.5 .. i + 0.5); None outside the weeks shown."""
    day = at.astimezone(UTC)
    i = bisect_right(mondays, day.date()) - 1
    if i < 0:
        return None
    start = datetime.combine(mondays[i], datetime.min.time(), tzinfo=UTC)
    share = (day - start).total_seconds() / (7 * 86400)
    if share >= 1.0:
        return None  # after the last week shown
    return i - 0.5 + share


def with_marks(fig: Figure, positions: Sequence[tuple[float, Mark]]) -> Figure:
    """``fig`` with a dashed line and a label per change (the figure itself unchanged).
    The figure was escaped when built; the changes' words are escaped here, once."""
    if not positions:
        return fig
    shapes: list[dict[str, Any]] = []
    notes: list[dict[str, Any]] = []
    for x, mark in positions:
        shapes.append(
            {
                "type": "line",
                "xref": "x",
                "yref": "paper",
                "x0": x,
                "x1": x,
                "y0": 0,
                "y1": 1,
                "line": {"color": PALETTE["vermillion"], "dash": "dash", "width": 1.5},
            }
        )
        label = mark.description
        short = label if len(label) <= LABEL_CHARS else label[: LABEL_CHARS - 1] + "…"
        notes.append(
            {
                "x": x,
                "xref": "x",
                "y": 1,
                "yref": "paper",
                "yanchor": "bottom",
                "text": plain(short),
                "hovertext": plain(f"{mark.at:%Y-%m-%d %H:%M} UTC: {label}"),
                "showarrow": False,
                "font": {"size": 11, "color": PALETTE["vermillion"]},
            }
        )
    layout = dict(fig["layout"])
    layout["shapes"] = [*layout.get("shapes", []), *shapes]
    layout["annotations"] = [*layout.get("annotations", []), *notes]
    return {**fig, "layout": layout}


def on_runs(fig: Figure, starts: Sequence[datetime], marks: Sequence[Mark]) -> Figure:
    """The per-run chart with its changes marked."""
    placed = [(x, m) for m in marks if (x := run_position(starts, m.at)) is not None]
    return with_marks(fig, placed)


def on_weeks(fig: Figure, mondays: Sequence[date], marks: Sequence[Mark]) -> Figure:
    """A weekly chart with its changes marked."""
    placed = [(x, m) for m in marks if (x := week_position(mondays, m.at)) is not None]
    return with_marks(fig, placed)
