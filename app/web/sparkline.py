"""A sparkline as inline SVG, drawn on the server (pure: numbers in, markup out).

The overview's cards showed cost per run with Plotly, which made the portfolio load the
whole chart library (1.2 MB of script, 0.4 MB gzipped) for lines of a dozen points. A
polyline in the page costs a few hundred bytes and no script.

Coordinates: the first value at the left edge, the last at the right, the largest at
the top; ``PAD`` keeps the line's width and the end dot inside the box. Values that are
not finite break the line rather than bending it to zero.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

from app.web.figures_base import PALETTE

WIDTH = 240
HEIGHT = 40
PAD = 3.0
STROKE = PALETTE["blue"]  # the charts' blue: 5:1 against white (WCAG 1.4.11 asks 3:1)


def spark_points(
    values: Sequence[float], width: float = WIDTH, height: float = HEIGHT
) -> list[list[tuple[float, float]]]:
    """Segments of (x, y) points in SVG space; a non-finite value ends a segment."""
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return []
    low, high = min(finite), max(finite)
    span_x = width - 2 * PAD
    span_y = height - 2 * PAD
    step = span_x / (len(values) - 1) if len(values) > 1 else 0.0
    segments: list[list[tuple[float, float]]] = [[]]
    for i, v in enumerate(values):
        if not math.isfinite(v):
            if segments[-1]:
                segments.append([])
            continue
        x = PAD + i * step if len(values) > 1 else width / 2
        # A flat series sits in the middle instead of on an edge.
        y = PAD + (high - v) / (high - low) * span_y if high > low else height / 2
        segments[-1].append((round(x, 1), round(y, 1)))
    return [s for s in segments if s]


def sparkline_svg(values: Sequence[float], label: str) -> str:
    """The ``<svg>`` element: a line per segment and a dot on the latest value.

    ``label`` is the accessible name (escaped here); the numbers beside the line in the
    card say the same in words, so the picture is never the only carrier.
    """
    segments = spark_points(values)
    if not segments:
        return ""
    parts = [
        f'<svg class="sparkline" viewBox="0 0 {WIDTH} {HEIGHT}" width="100%" '
        f'height="{HEIGHT}" preserveAspectRatio="none" role="img" '
        f'aria-label="{escape(label)}" focusable="false">',
        f"<title>{escape(label)}</title>",
    ]
    for segment in segments:
        points = " ".join(f"{x:g},{y:g}" for x, y in segment)
        parts.append(
            f'<polyline points="{points}" fill="none" stroke="{STROKE}" '
            'stroke-width="1.5" stroke-linejoin="round" vector-effect="non-scaling-stroke"/>'
        )
    # The latest value's dot: a zero-length line with round caps and an unscaled stroke,
    # because a circle would be stretched into an oval with the box's width.
    x, y = segments[-1][-1]
    parts.append(
        f'<path d="M{x:g} {y:g}h0" stroke="{STROKE}" stroke-width="5" '
        'stroke-linecap="round" vector-effect="non-scaling-stroke"/>'
    )
    parts.append("</svg>")
    return "".join(parts)
