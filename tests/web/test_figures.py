"""Plotly figure builders: the numbers drawn are the planning numbers, and the dicts are
valid, self-describing and safe to embed in a page."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from datetime import date, datetime, timedelta, timezone
from typing import Any

import numpy as np
import plotly.graph_objects as go
import pytest

from app.planning.economics import badput
from app.planning.failures import young_interval
from app.planning.goodput import goodput_from_totals
from app.planning.projection import project_costs
from app.planning.scaling import ScalingPoint, fit_usl, scaling_table
from app.planning.weekly import fill_weeks
from app.templating import _clean
from app.web.figures import (
    RunBadputRow,
    RunPoint,
    badput_by_run_figure,
    badput_by_week_figure,
    checkpoint_figure,
    cost_projection_figure,
    goodput_trend_figure,
    has_data,
    scaling_figure,
    to_json,
    utilization_quality_figure,
)
from app.web.figures_base import short_label
from tests.fixtures.figures import (
    ADVICE_ARGS,
    BASELINE,
    PRICE,
    PROBE,
    W45_RUN,
    advice,
    projections,
    run,
    run_points,
    weeks,
)
from tests.fixtures.planning import totals_from_runs

XSS = "</script><script>alert(1)</script>"
# What Plotly receives for it: entities it shows as the characters, never as markup.
XSS_TEXT = "&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;"


def all_figures() -> dict[str, dict[str, Any]]:
    table = scaling_table(PROBE)
    return {
        "cost": cost_projection_figure(projections(), 1300.0),
        "badput_run": badput_by_run_figure(
            [RunBadputRow("r1", "baseline", datetime(2026, 11, 2), badput(W45_RUN))], "gpu_hours"
        ),
        "badput_week": badput_by_week_figure(weeks(), "usd"),
        "goodput": goodput_trend_figure(weeks()),
        "util_quality": utilization_quality_figure(run_points(), "accuracy"),
        "scaling": scaling_figure(table, fit_usl(PROBE)),
        "checkpoint": checkpoint_figure(advice(), **ADVICE_ARGS),
    }


def trace(fig: dict[str, Any], name: str) -> dict[str, Any]:
    matches: list[dict[str, Any]] = [t for t in fig["data"] if t["name"] == name]
    assert len(matches) == 1, [t["name"] for t in fig["data"]]
    return matches[0]


# --- every figure ------------------------------------------------------------------------


@pytest.mark.parametrize("key", list(all_figures()))
def test_every_figure_is_valid_plotly_and_self_describing(key: str) -> None:
    fig = all_figures()[key]
    go.Figure(fig)  # plotly.py rejects unknown or misplaced properties
    layout = fig["layout"]
    assert layout["title"]["text"]
    assert layout["meta"]["kind"] and len(layout["meta"]["note"]) > 20
    assert layout["autosize"] is True and "width" not in layout and "height" not in layout
    assert layout["legend"]["orientation"] == "h"
    axes = [k for k in layout if k.startswith(("xaxis", "yaxis"))]
    assert {"xaxis", "yaxis"} <= set(axes)
    for name in axes:
        if layout[name].get("visible") is False:
            continue  # the budget line's hidden x axis
        assert layout[name].get("title", {}).get("text"), f"{key}.{name} has no title"
    assert fig["data"] and has_data(fig)
    for t in fig["data"]:
        assert "%{y" in t["hovertemplate"] or "%{customdata" in t["hovertemplate"]
    assert json.loads(to_json(fig)) == json.loads(json.dumps(fig))


def test_figure_kinds_are_distinct() -> None:
    kinds = [f["layout"]["meta"]["kind"] for f in all_figures().values()]
    assert len(set(kinds)) == len(kinds)


# --- JSON embedding -----------------------------------------------------------------------


def test_to_json_escapes_markup_and_round_trips_a_hostile_variant_name() -> None:
    fig = cost_projection_figure(projections((XSS, "a & b > c")), 1000.0)
    text = to_json(fig)
    assert "<" not in text and ">" not in text and "&" not in text
    assert "\\u003cextra\\u003e" in text  # the hover templates' own markup, escaped too
    back = json.loads(text)
    assert [t["name"] for t in back["data"]] == [
        XSS_TEXT,
        "a &amp; b &gt; c",
        "Budget $1,000/month",
    ]
    assert XSS not in back["data"][0]["hovertemplate"]  # referenced, never interpolated


def test_to_json_replaces_nan_and_infinity_by_null() -> None:
    fig = {"data": [{"type": "scatter", "y": [math.nan, math.inf, -math.inf, 1.5]}], "layout": {}}
    assert json.loads(to_json(fig))["data"][0]["y"] == [None, None, None, 1.5]
    with pytest.raises(ValueError):
        json.dumps(fig, allow_nan=False)  # what to_json guards against


def test_to_json_writes_what_it_wrote_when_it_cleaned_every_figure_first() -> None:
    # The fast path (no NaN: written as it is) and the cleaning path give one text, for
    # every figure the pages draw and for the odd shapes: tuples, numpy floats, int keys,
    # a mapping json cannot write (cleaned: its keys as text).
    odd = {"data": ({"y": (np.float64(1.25), 2)},), "layout": {1: "one"}}
    for fig in [*all_figures().values(), odd, {"layout": {(1, 2): "pair"}}]:
        cleaned = json.dumps(_clean(fig), allow_nan=False, separators=(",", ":"))
        assert json.loads(to_json(fig)) == json.loads(cleaned)


# --- cost projection ---------------------------------------------------------------------


def test_cost_projection_bars_are_the_planning_numbers() -> None:
    p = projections()
    fig = cost_projection_figure(p, 1300.0)
    assert [t["name"] for t in fig["data"]] == ["baseline", "candidate", "Budget $1,300/month"]
    base, cand = fig["data"][0], fig["data"][1]
    assert base["x"] == cand["x"] == ["1×/week", "2×/week"]
    # The expected bill: weekly baseline, mean of $270, $280, $290 = $280 per run x 52/12
    # runs/month = $1,213.33
    assert base["y"][0] == pytest.approx(1213.333, abs=1e-3)
    # twice weekly candidate: mean of $152, $152, $148 = $150.67 x 2 x 52/12 = $1,305.78
    assert cand["y"][1] == pytest.approx(1305.778, abs=1e-3)
    for t, proj in zip(fig["data"][:2], p.values(), strict=True):
        assert t["y"] == [c.monthly_cost_usd for c in proj.cadences]
        err = t["error_y"]
        assert err["symmetric"] is False
        assert err["array"] == pytest.approx(
            [c.monthly_cost_p90_usd - c.monthly_cost_usd for c in proj.cadences]
        )
        assert err["arrayminus"] == pytest.approx(
            [c.monthly_cost_usd - c.monthly_cost_p10_usd for c in proj.cadences]
        )
    # the baseline runs differ, so its band is not degenerate
    assert base["error_y"]["array"][0] + base["error_y"]["arrayminus"][0] > 0
    assert "%{y:$,.0f}" in base["hovertemplate"]
    assert fig["layout"]["yaxis"]["title"]["text"] == "USD per month"
    assert fig["layout"]["barmode"] == "group"
    assert "4.333 weeks per month" in fig["layout"]["meta"]["note"]


def test_cost_projection_budget_line_spans_the_plot() -> None:
    fig = cost_projection_figure(projections(), 1300.0)
    budget = trace(fig, "Budget $1,300/month")  # the legend says the amount
    assert budget["y"] == [1300.0, 1300.0]
    assert budget["line"]["dash"] == "dash"
    assert budget["xaxis"] == "x2" and fig["layout"]["xaxis2"]["range"] == [0, 1]


def test_cost_projection_without_budget_has_one_trace_per_variant() -> None:
    fig = cost_projection_figure(projections(), None)
    assert len(fig["data"]) == 2
    assert "xaxis2" not in fig["layout"]


def test_cost_projection_orders_cadences_numerically_and_colours_variants_apart() -> None:
    p = {
        "a": project_costs(BASELINE, [2.0, 0.5]),
        "b": project_costs(BASELINE, [1.0]),
    }
    fig = cost_projection_figure(p, None)
    assert fig["layout"]["xaxis"]["categoryarray"] == ["0.5×/week", "1×/week", "2×/week"]
    assert fig["data"][0]["marker"]["color"] != fig["data"][1]["marker"]["color"]


def test_cost_projection_note_names_the_four_week_month() -> None:
    fig = cost_projection_figure({"x": project_costs(BASELINE, [1.0], convention="four_week")}, 0)
    # 4-week month: $280 x 4 = $1,120
    assert fig["data"][0]["y"] == pytest.approx([1120.0])
    assert "× 4 weeks per month" in fig["layout"]["meta"]["note"]
    assert trace(fig, "Budget $0/month")["y"] == [0, 0]  # a zero budget is still a budget


# --- badput ------------------------------------------------------------------------------

CAUSE_NAMES = [
    "Productive",
    "Data-loading stall",
    "Checkpoint writes",
    "Failure loss",
    "Other idle",
]


def test_badput_by_run_stacks_the_planning_breakdown() -> None:
    b = badput(W45_RUN)
    rows = [
        RunBadputRow("2026-11-02", "baseline", datetime(2026, 11, 2, 9), b),
        RunBadputRow("2026-11-02", "candidate", datetime(2026, 11, 2, 21), badput(run(7.6, 0.7))),
    ]
    fig = badput_by_run_figure(rows, "gpu_hours")
    assert [t["name"] for t in fig["data"]] == CAUSE_NAMES
    assert fig["layout"]["barmode"] == "stack"
    # 112 GPU-h at 38%: productive 42.56; stall 3 h x 8 = 24; checkpoint 1 h x 8 = 8;
    # other idle = 69.44 - 32 = 37.44
    ys = [t["y"][0] for t in fig["data"]]
    assert ys == pytest.approx([42.56, 24.0, 8.0, 0.0, 37.44])
    assert sum(ys) == pytest.approx(112.0)
    assert fig["data"][0]["x"] == ["2026-11-02", "2026-11-02 (2)"]  # same label, two bars
    assert fig["data"][0]["customdata"][0] == ["baseline", "2026-11-02 09:00:00", 0.38]
    assert "GPU-hours" in fig["layout"]["yaxis"]["title"]["text"]
    assert "GPU-hours" in fig["data"][1]["hovertemplate"]


def test_run_ticks_are_short_and_the_data_keeps_full_run_ids() -> None:
    ids = [f"5eed0000-0000-0000-0000-{n:012d}" for n in range(20)]  # UUID length: 36
    rows = [RunBadputRow(i, "baseline", datetime(2026, 11, 2), badput(W45_RUN)) for i in ids]
    fig = badput_by_run_figure(rows, "gpu_hours")
    xaxis = fig["layout"]["xaxis"]
    assert fig["data"][0]["x"] == ids  # hover (%{x}) shows the full id
    assert xaxis["tickvals"] == ids
    # 12 characters: the first 6, an ellipsis, the last 5 ("...0000000019" -> "00019").
    assert xaxis["ticktext"][19] == "5eed00…00019"
    assert all(len(t) <= 12 for t in xaxis["ticktext"])
    assert len(set(xaxis["ticktext"])) == 20  # still one distinct tick per run
    assert short_label("nightly-42") == "nightly-42"  # short labels are left alone
    assert short_label("2026-11-02 (2)") == "2026-1…2 (2)"  # a repeat's suffix survives


def test_badput_by_run_in_usd() -> None:
    rows = [RunBadputRow("r1", "baseline", datetime(2026, 11, 2), badput(W45_RUN).usd(PRICE))]
    fig = badput_by_run_figure(rows, "usd")
    # productive 42.56 GPU-h x $2.5 = $106.40; whole run 112 x 2.5 = $280
    assert fig["data"][0]["y"] == pytest.approx([106.4])
    assert sum(t["y"][0] for t in fig["data"]) == pytest.approx(280.0)
    assert fig["layout"]["yaxis"]["title"]["text"] == "USD per run"
    assert "%{y:$,.2f}" in fig["data"][0]["hovertemplate"]


def test_badput_by_run_rejects_a_unit_mismatch() -> None:
    rows = [RunBadputRow("r1", "baseline", datetime(2026, 11, 2), badput(W45_RUN))]
    with pytest.raises(ValueError, match="gpu_hours"):
        badput_by_run_figure(rows, "usd")
    with pytest.raises(ValueError, match="unit"):
        badput_by_run_figure(rows, "euro")  # type: ignore[arg-type]


def test_badput_by_week_stacks_causes_and_zero_fills_empty_weeks() -> None:
    ws = weeks()
    fig = badput_by_week_figure(ws, "gpu_hours")
    # idle itself is not stacked; a week adds the attempts that did not succeed (none here)
    assert [t["name"] for t in fig["data"]] == [*CAUSE_NAMES, "Failed attempts"]
    assert fig["data"][-1]["y"] == [0.0, 0.0, 0.0]
    assert fig["data"][0]["x"] == ["2026-W45", "2026-W46", "2026-W47"]
    # W45: productive 2 x 42.56 = 85.12; stall 24 (one run); W46 empty -> zeros
    assert fig["data"][0]["y"] == pytest.approx([85.12, 0.0, 0.38 * 104])
    assert fig["data"][1]["y"] == pytest.approx([24.0, 0.0, 0.0])
    assert all(t["y"][1] == 0.0 for t in fig["data"])
    # W45 stack = both runs' 224 GPU-h; W47 = 8 x 13 = 104
    assert sum(t["y"][0] for t in fig["data"]) == pytest.approx(224.0)
    assert sum(t["y"][2] for t in fig["data"]) == pytest.approx(104.0)
    assert fig["layout"]["xaxis"]["title"]["text"] == "ISO week"
    usd = badput_by_week_figure(ws, "usd")
    assert usd["data"][0]["y"][0] == pytest.approx(85.12 * PRICE)
    assert usd["layout"]["yaxis"]["title"]["text"] == "USD per week"


# --- goodput -----------------------------------------------------------------------------


def test_goodput_trend_has_gaps_for_weeks_without_runs() -> None:
    ws = weeks()
    fig = goodput_trend_figure(ws)
    names = [t["name"] for t in fig["data"]]
    assert names == ["Scheduling", "Runtime", "Program (utilization proxy)", "Overall"]
    for t, field in zip(fig["data"], ["scheduling", "runtime", "program", "overall"], strict=True):
        assert t["y"][1] is None and t["connectgaps"] is False
        assert t["y"][0] == pytest.approx(getattr(ws[0].goodput, field))
    # W45: scheduling = (period - queue) / period = 224 / (224 + 2 h x 8) = 0.9333
    assert fig["data"][0]["y"][0] == pytest.approx(224 / 240)
    # program proxy = useful busy GPU-h / forward-progress GPU-h (methodology.md §3):
    # 2 x 0.38 x 112 = 85.12 over 8 x (14 - 1 h checkpoint) + 8 x 14 = 216 -> 0.39407
    assert fig["data"][2]["y"][0] == pytest.approx(85.12 / 216)
    assert fig["data"][3]["y"][0] == pytest.approx(
        goodput_from_totals(totals_from_runs([W45_RUN, run(14.0)])).overall
    )
    yaxis = fig["layout"]["yaxis"]
    assert yaxis["tickformat"] == ".0%" and yaxis["range"] == [0, 1.05]
    assert "%{y:.1%}" in fig["data"][0]["hovertemplate"]


def test_goodput_trend_names_mfu_when_every_run_reports_it() -> None:
    fig = goodput_trend_figure(weeks(with_mfu=True))
    assert fig["data"][2]["name"] == "Program (MFU)"


def test_goodput_trend_names_mfu_when_most_runs_report_it_and_ticks_are_round() -> None:
    """Scaling probes without MFU beside MFU-reporting runs: the legend says MFU, with the
    utilization standing in for the rest, not "utilization proxy" for the whole chart."""
    mixed = [*weeks(with_mfu=True), *weeks()[:1]]
    fig = goodput_trend_figure(mixed)
    assert fig["data"][2]["name"] == "Program (MFU; utilization where runs report none)"
    axis = fig["layout"]["yaxis"]
    assert (axis["tick0"], axis["dtick"], axis["tickformat"]) == (0, 0.25, ".0%")
    assert fig["data"][2]["y"][0] == pytest.approx(0.3)


# --- utilization and quality -------------------------------------------------------------


def test_utilization_quality_two_panels_one_colour_per_variant() -> None:
    fig = utilization_quality_figure(run_points(), "accuracy")
    assert len(fig["data"]) == 4  # 2 variants x 2 panels
    util_b, qual_b, util_c, qual_c = fig["data"]
    assert [t["name"] for t in fig["data"]] == ["baseline", "baseline", "candidate", "candidate"]
    assert util_b.get("yaxis", "y") == "y" and qual_b["yaxis"] == "y2"
    assert util_b["line"]["color"] == qual_b["line"]["color"] != util_c["line"]["color"]
    assert qual_b["showlegend"] is False and util_b["legendgroup"] == qual_b["legendgroup"]
    # sorted by start time; aware datetimes shown in UTC
    assert util_b["x"] == ["2026-11-02 09:00:00", "2026-11-09 09:00:00"]
    assert util_b["y"] == [0.38, 0.40]
    assert util_b["customdata"] == ["r1", "r3"]
    # the candidate's first run reported no quality: left out of the quality panel only
    assert util_c["y"] == [0.71, 0.69] and qual_c["y"] == [0.913]
    layout = fig["layout"]
    assert layout["yaxis2"]["title"]["text"] == "accuracy"
    assert layout["yaxis"]["tickformat"] == ".0%"
    assert layout["yaxis"]["domain"][0] > layout["yaxis2"]["domain"][1]  # no overlap
    assert layout["xaxis"]["type"] == "date"


def test_utilization_quality_converts_offsets_to_utc() -> None:
    cet = timezone(timedelta(hours=1))
    points = [RunPoint(datetime(2026, 11, 2, 10, 0, tzinfo=cet), XSS, 0.5, 1.0, "<r>")]
    fig = utilization_quality_figure(points, XSS)
    assert fig["data"][0]["x"] == ["2026-11-02 09:00:00"]
    assert fig["data"][0]["name"] == XSS_TEXT
    assert XSS not in fig["data"][1]["hovertemplate"]
    assert json.loads(to_json(fig))["layout"]["yaxis2"]["title"]["text"] == XSS_TEXT


# --- scaling -----------------------------------------------------------------------------


def test_scaling_figure_measured_ideal_fit_and_efficiency() -> None:
    table = scaling_table(PROBE)
    model = fit_usl(PROBE)
    assert model is not None and model.kind == "usl"
    fig = scaling_figure(table, model)
    names = [t["name"] for t in fig["data"]]
    assert names == [
        "Ideal (linear)",
        "Measured speedup",
        "Efficiency (right axis)",
        "USL fit",
        "USL fit (extrapolated)",
    ]
    measured = trace(fig, "Measured speedup")
    # S(16) = 14 / 8 = 1.75; S(32) = 14 / 5.5 = 2.545
    assert measured["y"] == pytest.approx([1.0, 1.75, 14 / 5.5])
    eff = trace(fig, "Efficiency (right axis)")
    # E(16) = 1.75 x 8 / 16 = 0.875; E(32) = 2.545 x 8 / 32 = 0.636
    assert eff["yaxis"] == "y2" and eff["y"] == pytest.approx([1.0, 0.875, 14 / 5.5 / 4])
    assert fig["layout"]["yaxis2"]["overlaying"] == "y"
    assert fig["layout"]["yaxis2"]["tickformat"] == ".0%"
    ideal = trace(fig, "Ideal (linear)")
    assert ideal["x"] == [8, 64.0] and ideal["y"] == [1.0, 8.0]
    fit = trace(fig, "USL fit")
    assert min(fit["x"]) == 8 and max(fit["x"]) == 32
    assert fit["y"][0] == pytest.approx(1.0)  # C(N0) / C(N0)
    assert fit["y"][-1] == pytest.approx(model.capacity(32) / model.capacity(8))
    extra = trace(fig, "USL fit (extrapolated)")
    xs = [x for x in extra["x"] if x is not None]
    assert min(xs) == 1.0 and max(xs) == 64.0  # [1, 2 x max measured]
    assert None in extra["x"] and extra["line"]["dash"] == "dot"
    assert all(not (8 < x < 32) for x in xs)
    assert "s = " in fig["layout"]["meta"]["note"]


def test_scaling_figure_amdahl_and_without_model() -> None:
    two = [ScalingPoint(8, 14.0), ScalingPoint(16, 13.0)]
    fig = scaling_figure(scaling_table(two), fit_usl(two))
    assert "Amdahl fit" in [t["name"] for t in fig["data"]]
    bare = scaling_figure(scaling_table(two), None)
    assert len(bare["data"]) == 3
    assert trace(bare, "Ideal (linear)")["x"] == [8, 16.0]
    empty = scaling_figure([], None)
    assert empty["data"] == [] and not has_data(empty)


# --- checkpoints -------------------------------------------------------------------------


def test_checkpoint_curve_matches_the_advice() -> None:
    a = advice()
    fig = checkpoint_figure(a, **ADVICE_ARGS)
    total = trace(fig, "Total")
    by_minute = dict(zip(total["x"], total["y"], strict=True))
    # M = 1 / (512 x 4e-4) = 4.88 h; current 30 min
    assert by_minute[30.0] == pytest.approx(a.overhead_gpu_hours_per_run_current)
    assert by_minute[a.daly_interval_hours * 60] == pytest.approx(
        a.overhead_gpu_hours_per_run_optimal
    )
    writes, fails = trace(fig, "Checkpoint writes"), trace(fig, "Expected failure loss")
    assert [w + f for w, f in zip(writes["y"], fails["y"], strict=True)] == pytest.approx(
        total["y"]
    )
    # the first-order overhead curve bottoms out at Young's sqrt(2 d M)
    best = total["x"][total["y"].index(min(total["y"]))]
    assert best == pytest.approx(young_interval(5 / 60, a.mtbf_hours) * 60)
    markers = [t["name"] for t in fig["data"][3:]]
    assert markers == [
        "Current: 30 min",
        f"Young: {a.young_interval_hours * 60:.0f} min",
        f"Daly: {a.daly_interval_hours * 60:.0f} min",
    ]
    assert fig["layout"]["xaxis"]["type"] == "log"
    assert fig["layout"]["yaxis"]["title"]["text"] == "GPU-hours per run"


def test_checkpoint_figure_without_failures_has_only_the_current_marker() -> None:
    fig = checkpoint_figure(advice(rate=0.0), **ADVICE_ARGS)
    assert [t["name"] for t in fig["data"]][3:] == ["Current: 30 min"]
    assert set(trace(fig, "Expected failure loss")["y"]) == {0.0}
    assert "no failures" in fig["layout"]["meta"]["note"]
    json.loads(to_json(fig))


# --- emptiness ---------------------------------------------------------------------------


EMPTY: dict[str, Callable[[], dict[str, Any]]] = {
    "cost": lambda: cost_projection_figure({}, 1000.0),
    "badput_run": lambda: badput_by_run_figure([], "gpu_hours"),
    "badput_week_no_runs": lambda: badput_by_week_figure(
        fill_weeks([], date(2026, 11, 2), date(2026, 11, 20)), "usd"
    ),
    "goodput_no_runs": lambda: goodput_trend_figure(
        fill_weeks([], date(2026, 11, 2), date(2026, 11, 20))
    ),
    "util_quality": lambda: utilization_quality_figure([], "accuracy"),
}


@pytest.mark.parametrize("key", list(EMPTY))
def test_has_data_is_false_without_data(key: str) -> None:
    fig = EMPTY[key]()
    assert not has_data(fig)
    go.Figure(fig)
    json.loads(to_json(fig))


def test_has_data_ignores_reference_traces_but_counts_real_zero_points() -> None:
    budget_only = cost_projection_figure({}, 500.0)
    assert budget_only["data"] == []
    fig = {"data": [{"type": "scatter", "y": [0.0], "meta": {"role": "reference"}}]}
    assert not has_data(fig)
    fig["data"][0].pop("meta")
    assert has_data(fig)  # a line at zero is data; a zero-height bar is not
    assert not has_data({"data": [{"type": "bar", "y": [0.0, None]}]})
