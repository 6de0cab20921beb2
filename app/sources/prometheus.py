"""Stored run -> one PromQL range query over its window -> its measurements. Pure.

``--match`` is a label matcher with placeholders: ``{run_id}``, ``{pipeline}`` and any
of the run's tags (``pod=~"{run_id}-.*", namespace="{namespace}"``). Values are escaped
for PromQL's double-quoted strings, so a run id cannot close the matcher. One query per
run asks for both DCGM metrics, averaged over the run's GPUs in PromQL; the window mean
is taken here over the evaluated points.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from app.planning.dcgm import (
    Choice,
    choose_gpus,
    coverage_note,
    not_a_measurement,
    window_mean,
)

PROFILING = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
LABEL = "cadence_metric"  # tells the two halves of the query's answer apart
# A workload label at the start of a matcher or after a comma: pod=~"...", namespace="..."
EXPORTED = re.compile(r'(^|,\s*)(pod|namespace|container)(\s*(?:=~|!~|!=|=)\s*")')
PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_.-]*)\}")
MAX_POINTS = 120  # a window is evaluated at most this many times (cost grows with it)
MIN_STEP_SECONDS = 1.0


class TemplateError(Exception):
    """The --match template is malformed."""


@dataclass(frozen=True)
class Window:
    run_id: str
    pipeline: str
    start: datetime
    end: datetime
    query: str
    step: float  # seconds


def check_template(template: str) -> None:
    if not template.strip():
        raise TemplateError('--match is empty: give a label matcher, e.g. pod=~"{run_id}-.*"')
    rest = PLACEHOLDER.sub("", template)
    if "{" in rest or "}" in rest:
        raise TemplateError(
            f"--match {template!r}: braces are only for placeholders like {{run_id}}; "
            "the matcher goes without its own braces"
        )


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def matcher(template: str, run: dict[str, Any]) -> str:
    """The template with the run's values; KeyError names a placeholder it lacks."""
    values = {**run.get("tags", {}), "run_id": run["run_id"], "pipeline": run["pipeline"]}

    def fill(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in values:
            raise KeyError(name)
        return _escape(str(values[name]))

    return PLACEHOLDER.sub(fill, template)


def exported(labels: str) -> str:
    """The matcher as Prometheus stores it when it scraped dcgm-exporter with
    ``honorLabels: false`` (the Helm chart's default): ``pod`` -> ``exported_pod``."""
    return EXPORTED.sub(lambda m: f"{m.group(1)}exported_{m.group(2)}{m.group(3)}", labels)


def query(labels: str) -> str:
    """Both metrics in one query, one series per GPU (each GPU is checked for the
    silent zero before the mean); the workload's labels as written or as exported_*."""
    alt = exported(labels)

    def either(metric: str) -> str:
        own = f"{metric}{{{labels}}}"
        return own if alt == labels else f"({own} or {metric}{{{alt}}})"

    return (
        f'label_replace({either(PROFILING)}, "{LABEL}", "profiling", "", "") or '
        f'label_replace({either(GPU_UTIL)}, "{LABEL}", "gpu_util", "", "")'
    )


def window(template: str, run: dict[str, Any]) -> Window:
    start = datetime.fromisoformat(run["started_at"])
    end = datetime.fromisoformat(run["finished_at"])
    seconds = (end - start).total_seconds()
    step = max(MIN_STEP_SECONDS, math.ceil(seconds / MAX_POINTS))
    return Window(run["run_id"], run["pipeline"], start, end, query(matcher(template, run)), step)


class AnswerError(ValueError):
    """An answer that is not DCGM measurements of the window: the wrong shape, or a
    value no GPU can read. The run is listed as not enriched, with this message."""


HIGHEST = {"profiling": (PROFILING, 1.0), "gpu_util": (GPU_UTIL, 100.0)}


def means(result: Any) -> tuple[float | None, float | None]:
    """(profiling mean 0..1, GPU_UTIL mean in percent) from a query_range answer's data.
    Raises AnswerError for an answer of the wrong shape or a value out of range."""
    series_list = result.get("result", []) if isinstance(result, dict) else None
    if not isinstance(series_list, list):
        raise AnswerError("Prometheus answered data whose result is not a list of series")
    found: dict[str, float | None] = {"profiling": None, "gpu_util": None}
    for series in series_list:
        if not isinstance(series, dict) or not isinstance(series.get("metric", {}), dict):
            raise AnswerError("Prometheus answered a series that is not an object with labels")
        name = (series.get("metric") or {}).get(LABEL)
        if name in found:
            metric, highest = HIGHEST[name]
            values = _values(metric, series.get("values"))
            problem = not_a_measurement(metric, values, highest)
            if problem is not None:
                raise AnswerError(problem)
            found[name] = window_mean(values)
    return found["profiling"], found["gpu_util"]


def _values(metric: str, points: Any) -> list[float]:
    """A matrix series' values: ``[[time, "value"], ...]``."""
    if not isinstance(points, list):
        raise AnswerError(f"Prometheus answered {metric} values that are not a list")
    values = []
    for point in points:
        if not isinstance(point, list | tuple) or len(point) != 2:
            raise AnswerError(f"Prometheus answered a {metric} point that is not [time, value]")
        try:
            values.append(float(point[1]))
        except (TypeError, ValueError):
            raise AnswerError(f"{metric} reads {point[1]!r}, not a number") from None
    return values


def gpu_key(labels: dict[str, Any]) -> str:
    """Which GPU a series is: its UUID, else its host and index."""
    if labels.get("UUID"):
        return str(labels["UUID"])
    return f"{labels.get('Hostname') or labels.get('instance')}/{labels.get('gpu')}"


def per_gpu(result: Any) -> tuple[dict[str, list[float | None]], list[int]]:
    """{GPU: [profiling mean, GPU_UTIL mean]} and each series' point count; raises
    AnswerError as ``means`` does."""
    means(result)  # the shape and every value checked first
    found: dict[str, list[float | None]] = {}
    points = []
    for series in result["result"]:
        labels = series.get("metric") or {}
        slot = {"profiling": 0, "gpu_util": 1}.get(str(labels.get(LABEL)))
        if slot is None:
            continue
        values = [float(v) for _, v in series.get("values") or []]
        found.setdefault(gpu_key(labels), [None, None])[slot] = window_mean(values)
        points.append(len(values))
    return found, points


def choice(result: Any, expected_points: int = 0) -> Choice:
    """The run's utilization from the GPUs' series; flagged when they cover < 90%."""
    gpus, points = per_gpu(result)
    picked = choose_gpus([(p, u) for p, u in gpus.values()])
    short = coverage_note(points, expected_points) if picked.utilization is not None else ""
    if short:
        return Choice(
            picked.utilization, picked.source, "; ".join(filter(None, [picked.note, short]))
        )
    return picked


def expected_points(w: Window) -> int:
    """The points a query_range over the whole window evaluates."""
    return int((w.end - w.start).total_seconds() // w.step) + 1
