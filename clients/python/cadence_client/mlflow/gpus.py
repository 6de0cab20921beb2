"""Which of an MLflow run's GPU utilization series are the job's, and their mean.

MLflow's system-metrics monitor samples every GPU of the host through NVML
(``system/gpu_N_utilization_percentage``, per node ``system/node_K/gpu_N_...``), and
their aggregate ``system/gpu_utilization_percentage``. A 1-GPU job on a 4-GPU node
would read the node's mean (0.225 for a GPU at 90 %). With more series than the job's
workers, the job's are, in order:

1. those a logged ``CUDA_VISIBLE_DEVICES`` (param or tag) names;
2. else the busiest ``workers`` series, when every other series is idle (a mean of at
   most ``IDLE`` percent): the other GPUs ran no one's job, so the busy ones were
   this job's. The run gets a note saying so;
3. else the utilization is refused with a note: another job was busy on the host, and
   "busiest" cannot tell whose GPUs were whose.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

SYSTEM_UTILIZATION = "system/gpu_utilization_percentage"
# One per GPU of the host (system/gpu_0_...), or of each node (system/node_1/gpu_0_...).
PER_GPU_UTILIZATION = re.compile(r"^system/(?:node_\d+/)?gpu_(\d+)_utilization_percentage$")
VISIBLE = "CUDA_VISIBLE_DEVICES"
# A GPU whose mean over the run is at most this (percent) ran no job: NVML reads 0-2 %
# on an idle GPU (driver housekeeping), a training job tens of percent.
IDLE = 5.0
# (timestamp ms, value) of every logged value of a run's metric key.
History = Callable[[str], "list[tuple[int, float]]"]


class NotTheJobs(Exception):
    """The job's GPU series cannot be told apart from the host's; the message says why."""


@dataclass(frozen=True)
class Pick:
    utilization: float | None  # a fraction; None when the run has no usable series
    note: str = ""  # set when the series were chosen by how busy they were


def per_gpu_keys(metrics: dict[str, str]) -> list[str]:
    return sorted(k for k in metrics if PER_GPU_UTILIZATION.match(k))


def mean_over(points: list[tuple[int, float]], window: tuple[int, int], last: str) -> str:
    """The mean of the values logged within the run's window (all of them when none
    is, e.g. clocks apart), as text like the other values; ``last`` without history.
    Values are sampled at a steady interval, so their plain mean is the time-average."""
    finite = [(t, v) for t, v in points if math.isfinite(v)]
    inside = [v for t, v in finite if window[0] <= t <= window[1]] or [v for _, v in finite]
    return repr(sum(inside) / len(inside)) if inside else last


def pick(
    metrics: dict[str, str],
    visible: str,
    workers: object,
    window: tuple[int, int],
    history: History | None,
) -> Pick:
    """The job's utilization from MLflow's system metrics (see the module's rules).
    Worked: GPUs [0, 0, 90, 0] %, 1 worker, no CUDA_VISIBLE_DEVICES: the busiest, 0.90,
    noted (the others idle); [0, 85, 90, 0] %: refused (GPU 1 is busy too)."""
    keys = per_gpu_keys(metrics)
    percents = _percents(metrics, keys or [SYSTEM_UTILIZATION], window, history)
    if percents is None:
        return Pick(None)
    if not isinstance(workers, int) or len(keys) <= workers:
        if SYSTEM_UTILIZATION in metrics:  # the aggregate of the job's own GPUs
            aggregate = _percents(metrics, [SYSTEM_UTILIZATION], window, history)
            return Pick(None if aggregate is None else _fraction(aggregate.values()))
        return Pick(_fraction(percents.values()))
    wanted = {v.strip() for v in visible.split(",") if v.strip()}
    if wanted:
        chosen = [k for k in keys if (m := PER_GPU_UTILIZATION.match(k)) and m.group(1) in wanted]
        if not chosen:
            raise NotTheJobs(
                f"{VISIBLE}={visible} names none of the {len(keys)} GPU series MLflow logged"
            )
        return Pick(_fraction(percents[k] for k in chosen))
    return _busiest(percents, workers)


def _busiest(percents: dict[str, float], workers: int) -> Pick:
    ranked = sorted(percents, key=lambda k: (-percents[k], k))
    chosen, rest = ranked[:workers], ranked[workers:]
    busy = [k for k in rest if percents[k] > IDLE]
    count = f"{len(percents)} GPU utilization series for {workers} workers"
    if busy:
        raise NotTheJobs(
            f"MLflow logged {count} and no {VISIBLE}; {_short(busy[0])} at "
            f"{percents[busy[0]]:.0f}% is busy too (another job on the host?), so the job's "
            f"GPUs cannot be told apart: utilization refused; log {VISIBLE} as a param or "
            "tag, or map gpu_utilization"
        )
    note = (
        f"MLflow logged {count} and no {VISIBLE}: took the busiest "
        f"{', '.join(_short(k) for k in chosen)}; the others were idle "
        f"(at most {IDLE:g}%)"
    )
    return Pick(_fraction(percents[k] for k in chosen), note)


def _percents(
    metrics: dict[str, str],
    keys: list[str],
    window: tuple[int, int],
    history: History | None,
) -> dict[str, float] | None:
    """Each present key's mean over the run, in percent; None when there is none or a
    value is not a percentage."""
    out: dict[str, float] = {}
    for key in keys:
        if key not in metrics:
            continue
        raw = mean_over(history(key), window, metrics[key]) if history else metrics[key]
        try:
            value = float(raw)
        except ValueError:
            return None
        if not (math.isfinite(value) and 0 <= value <= 100):
            return None
        out[key] = value
    return out or None


def _fraction(percents: Iterable[float]) -> float:
    values = list(percents)
    return sum(values) / len(values) / 100


def _short(key: str) -> str:
    """``system/node_1/gpu_2_utilization_percentage`` -> ``node_1/gpu_2``."""
    return key.removeprefix("system/").removesuffix("_utilization_percentage")
