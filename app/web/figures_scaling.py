"""Scaling probe and checkpoint-interval figures."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from app.planning.durations import duration
from app.planning.failures import CheckpointAdvice, checkpoint_overhead_hours
from app.planning.scaling import ScalingModel, ScalingRow
from app.web.figures_base import PALETTE, REFERENCE, Figure, axis, layout, text_safe

FIT_SAMPLES = 60
NICE_MINUTES = (
    1,
    2,
    5,
    10,
    15,
    20,
    30,
    45,
    60,
    90,
    120,
    180,
    240,
    360,
    480,
    720,
    1440,
    2880,
    5760,
    10080,
)
"""Tick positions for the log-scale checkpoint interval axis, in minutes."""


def _linspace(lo: float, hi: float, n: int) -> list[float]:
    if n < 2 or hi <= lo:
        return [lo]
    return [lo + (hi - lo) * i / (n - 1) for i in range(n)]


def _geomspace(lo: float, hi: float, n: int) -> list[float]:
    if n < 2 or hi <= lo:
        return [lo]
    ratio = (hi / lo) ** (1.0 / (n - 1))
    return [lo * ratio**i for i in range(n)]


def _minute_ticks(lo: float, hi: float) -> dict[str, Any]:
    ticks = [m for m in NICE_MINUTES if lo <= m <= hi]
    return {"tickvals": ticks} if len(ticks) >= 2 else {}


@text_safe
def scaling_figure(table: Sequence[ScalingRow], model: ScalingModel | None) -> Figure:
    """Measured speedup vs workers, the ideal linear speedup, the fitted curve (its
    extrapolated parts as a separate dotted trace) and efficiency on a right-hand axis."""
    data: list[dict[str, Any]] = []
    n0 = min((r.workers for r in table), default=1)
    if table:
        rows = sorted(table, key=lambda r: r.workers)
        x_max = float(rows[-1].workers) * (2.0 if model is not None else 1.0)
        data = [_ideal_trace(n0, x_max), *_measured_traces(rows)]
        if model is not None:
            data.extend(_fit_traces(model, n0, rows[-1].workers))
    note = (
        "Speedup S(N) = T(N0) / T(N) from the median wall clock at each worker count N "
        f"(N0 = {n0}); efficiency E(N) = S(N) × N0 / N; ideal is S(N) = N / N0."
    )
    if model is not None:
        note += (
            f" Fit: C(N) = N / (1 + s(N − 1) + kN(N − 1)) with s = {model.s:.3g}, "
            f"k = {model.k:.3g}, drawn as C(N) / C(N0); dotted where extrapolated."
        )
    return {
        "data": data,
        "layout": layout(
            "scaling",
            "Speedup and efficiency by workers",
            note,
            xaxis=axis("workers", rangemode="tozero"),
            yaxis=axis(f"Speedup (× vs {n0} workers)", rangemode="tozero"),
            yaxis2=axis(
                "Efficiency (%)",
                overlaying="y",
                side="right",
                tickformat=".0%",
                range=[0, 1.05],
                tick0=0,
                dtick=0.25,
                showgrid=False,
            ),
        ),
    }


def _measured_traces(rows: Sequence[ScalingRow]) -> list[dict[str, Any]]:
    """The measured speedup (markers) and efficiency (right axis) at each worker count."""
    workers = [r.workers for r in rows]
    return [
        {
            "type": "scatter",
            "mode": "markers",
            "name": "Measured speedup",
            "x": workers,
            "y": [r.speedup for r in rows],
            "marker": {"color": PALETTE["blue"], "size": 10},
            "customdata": [[r.wall_clock_hours, r.runs, r.gpu_hours] for r in rows],
            "hovertemplate": "%{x} workers: speedup %{y:.3f}×<br>median wall clock "
            "%{customdata[0]:.2f} h over %{customdata[1]} runs, %{customdata[2]:,.1f} "
            "GPU-hours<extra></extra>",
        },
        {
            "type": "scatter",
            "mode": "lines+markers",
            "name": "Efficiency (right axis)",
            "x": workers,
            "y": [r.efficiency for r in rows],
            "yaxis": "y2",
            "line": {"color": PALETTE["orange"], "width": 1.5},
            "marker": {"color": PALETTE["orange"], "symbol": "diamond", "size": 8},
            "hovertemplate": "%{x} workers: efficiency %{y:.1%}<extra></extra>",
        },
    ]


def _ideal_trace(n0: int, x_max: float) -> dict[str, Any]:
    return {
        "type": "scatter",
        "mode": "lines",
        "name": "Ideal (linear)",
        "x": [n0, x_max],
        "y": [1.0, x_max / n0],
        "line": {"color": PALETTE["grey"], "dash": "dash", "width": 1.5},
        "hovertemplate": "%{x:.0f} workers: ideal speedup %{y:.2f}×<extra></extra>",
        "meta": REFERENCE,
    }


def _fit_traces(model: ScalingModel, n0: int, n_max: int) -> list[dict[str, Any]]:
    name = "USL fit" if model.kind == "usl" else "Amdahl fit"
    lo, hi = float(model.min_workers), float(model.max_workers)
    c0 = model.capacity(n0)

    def speedup(xs: list[float]) -> list[float]:
        return [model.capacity(x) / c0 for x in xs]

    inside = _linspace(lo, hi, FIT_SAMPLES)
    below = _linspace(1.0, lo, FIT_SAMPLES // 3) if lo > 1.0 else []
    above = _linspace(hi, 2.0 * n_max, FIT_SAMPLES) if 2.0 * n_max > hi else []
    gap: list[float | None] = [None] if below and above else []
    hover = "%{x:.1f} workers: fitted speedup %{y:.3f}×"
    style: dict[str, Any] = {"type": "scatter", "mode": "lines"}
    traces = [
        {
            **style,
            "name": name,
            "x": inside,
            "y": speedup(inside),
            "line": {"color": PALETTE["vermillion"], "width": 2},
            "hovertemplate": hover + "<extra>" + name + "</extra>",
        }
    ]
    if below or above:
        traces.append(
            {
                **style,
                "name": f"{name} (extrapolated)",
                "x": [*below, *gap, *above],
                "y": [*speedup(below), *gap, *speedup(above)],
                "connectgaps": False,
                "line": {"color": PALETTE["vermillion"], "width": 2, "dash": "dot"},
                "hovertemplate": hover + " (extrapolated, outside the probed "
                f"{model.min_workers}–{model.max_workers} workers)<extra></extra>",
            }
        )
    return traces


@text_safe
def checkpoint_figure(
    advice: CheckpointAdvice,
    *,
    write_hours: float,
    workers: float,
    wall_clock_hours: float,
    restart_overhead_hours: float = 0.0,
) -> Figure:
    """Checkpoint overhead per run against the checkpoint interval (log scale, minutes):
    writes, expected failure loss and their total, with the current, Young and Daly
    intervals as vertical markers.

    Pass the same ``write_hours``, ``workers``, ``wall_clock_hours`` and
    ``restart_overhead_hours`` (= resume + reschedule) that produced ``advice``.
    """
    marks = [
        ("Current", advice.current_interval_hours, PALETTE["black"], "solid"),
        ("Young", advice.young_interval_hours, PALETTE["sky"], "dash"),
        ("Daly", advice.daly_interval_hours, PALETTE["green"], "dot"),
    ]
    shown = [m for m in marks if math.isfinite(m[1]) and m[1] > 0]
    lo = min(m[1] for m in shown) / 4.0
    hi = max(m[1] for m in shown) * 4.0
    grid = sorted({*_geomspace(lo, hi, 80), *(m[1] for m in shown)})

    def overhead(c: float) -> tuple[float, float]:
        writes, fails = checkpoint_overhead_hours(
            c, write_hours, advice.mtbf_hours, wall_clock_hours, restart_overhead_hours
        )
        return writes * workers, fails * workers

    parts = [overhead(c) for c in grid]
    data = _overhead_curves([c * 60.0 for c in grid], parts)
    top = max(w + f for w, f in parts)
    data += [_interval_marker(mark, sum(overhead(mark[1])), top) for mark in shown]
    return {
        "data": data,
        "layout": layout(
            "checkpoint_interval",
            "Checkpoint overhead vs interval",
            _checkpoint_note(write_hours, advice.mtbf_hours),
            xaxis=axis(
                "Checkpoint interval (minutes, log scale)",
                type="log",
                **_minute_ticks(lo * 60, hi * 60),
            ),
            yaxis=axis("GPU-hours per run", rangemode="tozero"),
        ),
    }


def _overhead_curves(
    minutes: list[float], parts: list[tuple[float, float]]
) -> list[dict[str, Any]]:
    """Writes, expected failure loss and their total per run, at each interval."""
    value = "%{x:.1f} min interval: %{y:,.2f} GPU-hours per run"
    return [
        {
            "type": "scatter",
            "mode": "lines",
            "name": name,
            "x": minutes,
            "y": ys,
            "line": {"color": colour, "dash": dash, "width": 3 if name == "Total" else 1.5},
            "hovertemplate": value + "<extra>" + name + "</extra>",
        }
        for name, ys, colour, dash in (
            ("Checkpoint writes", [w for w, _ in parts], PALETTE["orange"], "dash"),
            ("Expected failure loss", [f for _, f in parts], PALETTE["vermillion"], "dot"),
            ("Total", [w + f for w, f in parts], PALETTE["blue"], "solid"),
        )
    ]


def _interval_marker(mark: tuple[str, float, str, str], total: float, top: float) -> dict[str, Any]:
    """A vertical line at one interval (current, Young or Daly), hovering its total."""
    name, interval, colour, dash = mark
    return {
        "type": "scatter",
        "mode": "lines",
        "name": f"{name}: {interval * 60:.0f} min",
        "x": [interval * 60.0, interval * 60.0],
        "y": [0.0, top],
        "customdata": [total, total],
        "line": {"color": colour, "dash": dash, "width": 1.5},
        "hovertemplate": f"{name}: %{{x:.1f}} min interval, total "
        "%{customdata:,.2f} GPU-hours per run<extra></extra>",
        "meta": REFERENCE,
    }


def _checkpoint_note(write_hours: float, mtbf: float) -> str:
    m_text = "no failures" if math.isinf(mtbf) else duration(mtbf)
    return (
        "Overhead per run = workers × [(T / c) × d + (T / M) × (c / 2 + resume + reschedule)] "
        f"for interval c, with write time d = {duration(write_hours)} and "
        f"M = 1 / (workers × failure rate) = {m_text}; "
        + (
            "without failures, longer intervals only save writes."
            if math.isinf(mtbf)
            else "it is lowest at Young's √(2dM), which Daly's higher-order interval refines."
        )
    )
