"""The overview's sparkline as inline SVG (app/web/sparkline.py), against coordinates
worked out by hand for the 240 x 40 box with 3 units of padding."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

from app.web.sparkline import spark_points, sparkline_svg

SVG = "{http://www.w3.org/2000/svg}"


def test_three_runs_span_the_box() -> None:
    # x: 3 + i x (240 - 6) / 2 = 3, 120, 237. y: lowest 270 at the bottom (40 - 3 = 37),
    # highest 290 at the top (3), 280 halfway: 3 + (290 - 280) / 20 x 34 = 20.
    assert spark_points([280.0, 290.0, 270.0]) == [[(3.0, 20.0), (120.0, 3.0), (237.0, 37.0)]]


def test_a_flat_series_and_a_single_run_sit_in_the_middle() -> None:
    assert spark_points([5.0, 5.0]) == [[(3.0, 20.0), (237.0, 20.0)]]
    assert spark_points([7.0]) == [[(120.0, 20.0)]]


def test_a_missing_value_breaks_the_line() -> None:
    # 1 at the bottom-left (3, 37), 3 at the top-right (237, 3); nothing for the NaN.
    assert spark_points([1.0, math.nan, 3.0]) == [[(3.0, 37.0)], [(237.0, 3.0)]]


def test_nothing_to_draw_gives_no_markup() -> None:
    assert sparkline_svg([], "Cost per run") == ""
    assert sparkline_svg([math.nan, math.inf], "Cost per run") == ""


def test_the_markup_is_an_accessible_svg_with_a_dot_on_the_latest_run() -> None:
    svg = sparkline_svg([280.0, 290.0, 270.0], 'Cost per run <"x">')
    root = ET.fromstring(svg.replace("<svg ", '<svg xmlns="http://www.w3.org/2000/svg" ', 1))
    assert root.get("role") == "img" and root.get("aria-label") == 'Cost per run <"x">'
    assert root.findtext(f"{SVG}title") == 'Cost per run <"x">'  # escaped in the markup
    (line,) = root.findall(f"{SVG}polyline")
    assert line.get("points") == "3,20 120,3 237,37"
    (dot,) = root.findall(f"{SVG}path")
    assert dot.get("d") == "M237 37h0"
    assert "<script" not in svg and "style=" not in svg  # nothing the CSP would refuse
