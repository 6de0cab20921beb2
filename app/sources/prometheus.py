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
    coverage,
    coverage_note,
    not_a_measurement,
    window_mean,
)
from app.planning.gpu_shares import ShareError, gpu_fraction

PROFILING = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
LABEL = "cadence_metric"  # tells the two halves of the query's answer apart
# A workload label at the start of a matcher or after a comma: pod=~"...", namespace="..."
EXPORTED = re.compile(r'(^|,\s*)(pod|namespace|container)(\s*(?:=~|!~|!=|=)\s*")')
# {TAG}, or {TAG|any}: a comma-separated tag as a regex alternation (Hostname=~"...").
PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_.-]*)(\|any)?\}")
META = re.compile(r"([.^$*+?()\[\]{}|\\])")  # what RE2 reads as more than itself
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
    workers: int | None = None  # the run's GPUs (or slices): more series are not its own


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
        if match.group(2):  # each name matched as itself: gpu-01 or gpu-02, nothing else
            names = [v.strip() for v in str(values[name]).split(",") if v.strip()]
            if not names:
                raise KeyError(name)
            return _escape("|".join(META.sub(r"\\\1", n) for n in names))
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
    labels = query(matcher(template, run))
    return Window(run["run_id"], run["pipeline"], start, end, labels, step, run.get("workers"))


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
    """Which GPU a series is: its UUID, else its host and index; a MIG instance adds its
    ``GPU_I_ID`` (the slices of one GPU share its UUID)."""
    if labels.get("UUID"):
        key = str(labels["UUID"])
    else:
        key = f"{labels.get('Hostname') or labels.get('instance')}/{labels.get('gpu')}"
    return f"{key}/mig-{labels['GPU_I_ID']}" if labels.get("GPU_I_ID") not in (None, "") else key


def gpu_size(labels: dict[str, Any]) -> float:
    """A series' GPU in whole GPUs: 1, or its MIG slice's share (dcgm-exporter labels a
    MIG instance's series ``GPU_I_PROFILE="3g.40gb"``: 3/7 of an A100-80GB)."""
    profile = labels.get("GPU_I_PROFILE")
    if not profile:
        return 1.0
    try:
        size = gpu_fraction(f"nvidia.com/mig-{profile}")
    except ShareError:
        size = None
    if size is None:
        raise AnswerError(
            f"a series of MIG profile {profile!r}, not in the table of profiles: its size "
            "is unknown, so the GPUs' mean cannot be weighed"
        )
    return float(size)


def per_gpu(
    result: Any,
) -> tuple[dict[str, list[float | None]], list[int], dict[str, float]]:
    """{GPU: [profiling mean, GPU_UTIL mean]}, each series' point count and {GPU: its
    size in whole GPUs}; raises AnswerError as ``means`` does."""
    means(result)  # the shape and every value checked first
    found: dict[str, list[float | None]] = {}
    points = []
    sizes: dict[str, float] = {}
    for series in result["result"]:
        labels = series.get("metric") or {}
        slot = {"profiling": 0, "gpu_util": 1}.get(str(labels.get(LABEL)))
        if slot is None:
            continue
        values = [float(v) for _, v in series.get("values") or []]
        key = gpu_key(labels)
        found.setdefault(key, [None, None])[slot] = window_mean(values)
        sizes[key] = gpu_size(labels)
        points.append(len(values))
    return found, points, sizes


def choice(result: Any, expected_points: int = 0, workers: int | None = None) -> Choice:
    """The run's utilization from the GPUs' series, MIG slices weighed by their size;
    flagged when they cover < 90% of the run, and how much they cover kept. More GPUs
    than the run's ``workers`` are refused: the matcher found GPUs that were not its
    own (a node-level matcher on a node the job shared)."""
    gpus, points, sizes = per_gpu(result)
    if workers and len(gpus) > workers:
        raise AnswerError(
            f"--match found {len(gpus)} GPUs for a run of {workers}: it matches GPUs that "
            "were not this run's (a node shared with other jobs?); not enriched"
        )
    picked = choose_gpus([(p, u) for p, u in gpus.values()], [sizes[k] for k in gpus])
    if picked.utilization is None:
        return picked
    short = coverage_note(points, expected_points)
    note = "; ".join(filter(None, [picked.note, short]))
    return Choice(picked.utilization, picked.source, note, coverage(points, expected_points))


def expected_points(w: Window) -> int:
    """The points a query_range over the whole window evaluates."""
    return int((w.end - w.start).total_seconds() // w.step) + 1
