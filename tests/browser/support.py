"""Constants and small helpers shared by the browser tests (fixtures live in conftest)."""

from __future__ import annotations

import re
from typing import Any

XSS_PIPELINE = "xss-pipe"
XSS_DISPLAY_NAME = "</script><script>alert(1)</script>"
XSS_VARIANT = "</script><script>alert(2)</script>"
XSS_TAG = "<img src=x onerror=alert(3)>"
EMPTY_PIPELINE = "empty-pipe"
RANKER = "recsys-ranker"
FRAUD = "fraud-detector"

# For every [data-figure] div: its embedded figure, and what Plotly drew from it.
CHART_STATE_JS = """
() => Array.from(document.querySelectorAll('[data-figure]')).map(el => {
  const source = document.getElementById(el.dataset.figure);
  const fig = JSON.parse(source.textContent);
  const svg = el.querySelector('svg.main-svg');
  return {
    id: el.id || el.dataset.figure,
    rendered: el.getAttribute('data-rendered'),
    embedded: fig.data.length,
    names: fig.data.map(t => t.name === undefined ? null : t.name),
    plotted: Array.isArray(el.data) ? el.data.length : null,
    drawn: el.querySelectorAll('.cartesianlayer .trace').length,
    svg: svg !== null,
    width: svg ? svg.getBoundingClientRect().width : 0,
    boxWidth: el.getBoundingClientRect().width,
    visible: el.offsetParent !== null,
  };
})
"""


def money(text: str) -> float:
    """``"$2,456"`` -> ``2456.0``."""
    match = re.search(r"-?\$\s?([\d,]+(?:\.\d+)?)", text)
    assert match, f"no dollar amount in {text!r}"
    return float(match.group(1).replace(",", ""))


def number(text: str) -> float:
    """``"1,234.5"`` or ``"38%"`` -> a float (the percent sign is dropped)."""
    cleaned = text.strip().replace(",", "").replace("%", "").replace("$", "")
    return float(cleaned)


def wait_for_charts(page: Any) -> None:
    """Until every [data-figure] div has been drawn by dashboard.js (an SVG inside)."""
    page.wait_for_function(
        """() => Array.from(document.querySelectorAll('[data-figure]')).every(
             el => el.getAttribute('data-rendered') === '1' && el.querySelector('svg.main-svg'))"""
    )


def chart_state(page: Any) -> list[dict[str, Any]]:
    return page.evaluate(CHART_STATE_JS)  # type: ignore[no-any-return]
