"""User strings in figures are text: Plotly.js renders <a href>, <b>, <i> (and more) in
every title, axis title, tick, legend and trace name, hover text and annotation, so a
variant or metric name carrying markup must reach Plotly escaped (issue 25, item 4)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from app.planning.cadence_value import cadence_value
from app.planning.decay import Decay, QualityPoint, fit_decay
from app.planning.economics import badput
from app.planning.scaling import fit_usl, scaling_table
from app.web.figures import (
    RunBadputRow,
    RunPoint,
    badput_by_run_figure,
    badput_by_week_figure,
    checkpoint_figure,
    cost_projection_figure,
    goodput_trend_figure,
    scaling_figure,
    utilization_quality_figure,
)
from app.web.figures_base import plain_figure
from app.web.figures_trend import review_trend_figure
from app.web.figures_value import cadence_curve_figure, decay_figure
from app.web.sparkline import sparkline_svg
from tests.fixtures.figures import (
    ADVICE_ARGS,
    BASELINE,
    CANDIDATE,
    PROBE,
    W45_RUN,
    advice,
    weeks,
)

HOSTILE = '<a href="https://evil.example/">click</a> <b>bold</b> <i>it</i> & co'
ESCAPED = '&lt;a href="https://evil.example/"&gt;click&lt;/a&gt; &lt;b&gt;bold&lt;/b&gt;'
MARKUP = ("<a", "</a", "<b>", "<i>")


def _cadence_curve() -> dict[str, Any]:
    v = cadence_value(
        Decay("linear", 0.004),
        value_usd_per_unit_month=200_000,
        cost_per_run_usd=280,
        weeks_per_month=52 / 12,
        wall_clock_hours=14,
        today_runs_per_week=1,
    )
    return cadence_curve_figure(v.curve, v.optimum, v.today)


def _decay() -> dict[str, Any]:
    points = [QualityPoint(a, 0.8 - 0.004 * a) for a in (0, 1, 2, 3)]
    return decay_figure(points, fit_decay(points), HOSTILE, higher_is_better=True)


def _points() -> list[RunPoint]:
    t0 = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
    return [
        RunPoint(t0, HOSTILE, 0.38, 0.910, HOSTILE),
        RunPoint(t0, "baseline", 0.40, 0.912, "r2"),
    ]


BUILDERS: dict[str, Callable[[], dict[str, Any]]] = {
    "cost": lambda: cost_projection_figure(
        {HOSTILE: _projection(BASELINE), "baseline": _projection(CANDIDATE)}, 1300.0
    ),
    "badput_run": lambda: badput_by_run_figure(
        [RunBadputRow(HOSTILE, HOSTILE, datetime(2026, 11, 2), badput(W45_RUN))], "gpu_hours"
    ),
    "badput_week": lambda: badput_by_week_figure(weeks(), "usd"),
    "goodput": lambda: goodput_trend_figure(weeks()),
    "review": lambda: review_trend_figure(weeks()),
    "util_quality": lambda: utilization_quality_figure(_points(), HOSTILE),
    "scaling": lambda: scaling_figure(scaling_table(PROBE), fit_usl(PROBE)),
    "checkpoint": lambda: checkpoint_figure(advice(), **ADVICE_ARGS),
    "cadence_curve": _cadence_curve,
    "decay": _decay,
}


def _projection(runs: list[Any]) -> Any:
    from app.planning.projection import project_costs

    return project_costs(runs, [1.0, 2.0])


def strings(value: Any, path: str = "") -> Iterator[tuple[str, str]]:
    """Every (path, string) in a figure but hover templates, which are ours."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            if key not in ("hovertemplate", "meta"):
                yield from strings(item, f"{path}.{key}")
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            yield from strings(item, f"{path}[{i}]")


@pytest.mark.parametrize("key", list(BUILDERS))
def test_no_figure_passes_markup_to_plotly(key: str) -> None:
    fig = BUILDERS[key]()
    for path, text in strings(fig):
        assert not any(tag in text for tag in MARKUP), f"{key}{path}: {text!r}"
    for trace in fig["data"]:
        template = trace.get("hovertemplate", "")
        assert "evil.example" not in template, f"{key}: user text inside a hover template"


@pytest.mark.parametrize("key", ["cost", "badput_run", "util_quality", "decay"])
def test_hostile_names_are_shown_as_literal_text(key: str) -> None:
    """Where the name appears, it appears whole, escaped (Plotly shows the entities as
    the characters, so the reader sees the name as typed)."""
    found = [text for _, text in strings(BUILDERS[key]()) if ESCAPED in text]
    assert found, key


def test_plain_figure_escapes_every_text_field() -> None:
    fig = plain_figure(
        {
            "data": [{"name": "<b>", "text": ["<i>"], "hovertext": "<a>", "x": ["<b>"]}],
            "layout": {
                "title": {"text": "<b>t</b>"},
                "xaxis": {"title": {"text": "<i>x</i>"}, "ticktext": ["<a>"]},
                "yaxis2": {"title": "<i>y</i>"},
                "legend": {"title": {"text": "<b>"}},
                "annotations": [{"text": "<a href='x'>n</a>"}],
            },
        }
    )
    assert fig["data"][0] == {
        "name": "&lt;b&gt;",
        "text": ["&lt;i&gt;"],
        "hovertext": "&lt;a&gt;",
        "x": ["&lt;b&gt;"],
    }
    assert fig["layout"]["title"]["text"] == "&lt;b&gt;t&lt;/b&gt;"
    assert fig["layout"]["xaxis"]["title"]["text"] == "&lt;i&gt;x&lt;/i&gt;"
    assert fig["layout"]["xaxis"]["ticktext"] == ["&lt;a&gt;"]
    assert fig["layout"]["yaxis2"]["title"] == "&lt;i&gt;y&lt;/i&gt;"
    assert fig["layout"]["legend"]["title"]["text"] == "&lt;b&gt;"
    assert fig["layout"]["annotations"][0]["text"] == "&lt;a href='x'&gt;n&lt;/a&gt;"


def test_the_inline_svg_sparkline_escapes_its_label() -> None:
    """The overview's sparklines are SVG drawn on the server (no Plotly): the label is
    its accessible name and title, escaped as HTML."""
    svg = sparkline_svg([280.0, 290.0], HOSTILE)
    assert "<a href" not in svg and "<b>" not in svg
    assert "&lt;a href=&quot;https://evil.example/&quot;&gt;" in svg
