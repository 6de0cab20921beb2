"""Plotly draws markup in names as text once the builders escape it (issue 25, item 4):
the "Utilization and <metric>" chart turned an <a href> in a variant into a link."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from app.assets import asset_url
from app.web.figures import RunPoint, utilization_quality_figure

pytestmark = pytest.mark.browser

LINK = '<a href="https://evil.example/">click</a>'
BOLD = "<b>bold</b><i>it</i>"


def test_markup_in_variant_and_metric_names_is_drawn_as_text(page: Any, live_server: Any) -> None:
    t0 = datetime(2026, 11, 2, 9, tzinfo=UTC)
    points = [
        RunPoint(t0, LINK, 0.38, 0.91, "r1"),
        RunPoint(t0 + timedelta(days=1), BOLD, 0.40, 0.92, "r2"),
    ]
    fig = utilization_quality_figure(points, LINK)
    page.goto(live_server.url("/help"))
    page.add_script_tag(url=live_server.url(asset_url("vendor/plotly-basic.min.js")))
    drawn = page.evaluate(
        """async fig => {
            const el = document.createElement('div');
            el.style.width = '900px'; el.style.height = '500px';
            document.body.appendChild(el);
            await Plotly.newPlot(el, fig.data, fig.layout);
            return {
                links: el.querySelectorAll('svg a').length,  // the modebar's logo is one
                bold: el.querySelectorAll('.legendtext [style*="bold"], b').length,
                legend: Array.from(el.querySelectorAll('.legendtext')).map(t => t.textContent),
                titles: Array.from(el.querySelectorAll('.g-y2title, .gtitle'))
                    .map(t => t.textContent),
            };
        }""",
        fig,
    )
    assert drawn["links"] == 0 and drawn["bold"] == 0, drawn
    assert LINK in drawn["legend"] and BOLD in drawn["legend"], drawn
    assert any(LINK in title for title in drawn["titles"]), drawn
