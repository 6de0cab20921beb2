"""MLflow run -> Cadence run record (a run payload), and the TOML mapping file.

Mapping file (every key optional)::

    quality_metric = "ndcg@10"          # Cadence's quality_metric (default "quality")
    utilization_is_percent = false      # true: 1 < gpu_utilization <= 100 is divided by 100
    utilization_source = "dcgm_sm_active"   # what measured the mapped utilization metric

    evaluations = "metrics.live_ndcg"   # optional: the serving model's quality over its life

    [fields]                            # Cadence field = "metrics|params|tags.<MLflow key>"
    gpu_utilization = "metrics.gpu_util"
    workers = "params.num_gpus"
    quality = "metrics.val_ndcg"

A field without a mapping is looked up under its own name in metrics, then params, then
tags (e.g. ``params.workers``). Utilization, when no mapping names it and the run has no
``gpu_utilization`` metric, is MLflow's own system metric
``system/gpu_utilization_percentage`` (or the mean of the per-GPU
``system/gpu_N_utilization_percentage``) divided by 100, with the source
``nvml_gpu_util`` (MLflow samples it through NVML). More GPU series than workers (MLflow
logs every GPU of the host): those a logged ``CUDA_VISIBLE_DEVICES`` names, else the
busiest ones when the others were idle (noted), else the run is refused
(``gpus.py``). Per-node keys (``system/node_K/gpu_N_...``) are read; without a
``workers`` param, one worker per GPU series.

A utilization metric is the **mean of its history over the run** (the values logged
between start_time and end_time; all of them when none is), not its last value: the
command passes the history in. MLflow's FINISHED runs are succeeded attempts, FAILED
ones failed and KILLED ones cancelled (these may lack utilization: a crash can come
before it is known); runs still RUNNING or SCHEDULED are skipped. The Cadence server
checks every field when the runs are posted (``command.py`` skips the runs it refuses).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from cadence_client.client import UTILIZATION_SOURCES
from cadence_client.mlflow.gpus import (
    SYSTEM_UTILIZATION,
    VISIBLE,
    NotTheJobs,
    mean_over,
    per_gpu_keys,
    pick,
)

MAX_TAGS = 50  # the server's limit on tags per run
NOTE_TAG = "utilization_note"  # why these GPU series were taken as the job's
OUTCOMES = {"FINISHED": "succeeded", "FAILED": "failed", "KILLED": "cancelled"}
# (timestamp ms, value) of every logged value of a run's metric key.
History = Callable[[str], "list[tuple[int, float]]"]

SECTIONS = ("metrics", "params", "tags")
# Cadence field name in the mapping -> RunIn field.
FIELDS: dict[str, str] = {
    "workers": "workers",
    "gpu_utilization": "gpu_utilization",
    "gpu_type": "gpu_type",
    "gpu_hours": "gpu_hours",
    "price_per_gpu_hour": "price_per_gpu_hour",
    "quality": "quality_value",
    "data_stall_hours": "data_stall_hours",
    "checkpoint_hours": "checkpoint_hours",
    "scheduling_wait_hours": "scheduling_wait_hours",
    "mfu": "mfu",
    "variant": "variant",
}
TEXT_FIELDS = {"gpu_type", "variant"}
TOP_LEVEL = {
    "evaluations",
    "fields",
    "quality_metric",
    "utilization_is_percent",
    "utilization_source",
}
TAG_KEY_MAX, TAG_VALUE_MAX = 100, 500
CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


class MappingError(Exception):
    """The mapping file is unreadable or names unknown keys."""


@dataclass(frozen=True)
class Source:
    section: str  # metrics | params | tags
    key: str

    def __str__(self) -> str:
        return f"{self.section}.{self.key}"


@dataclass(frozen=True)
class Mapping:
    fields: dict[str, Source] = field(default_factory=dict)
    quality_metric: str = "quality"
    utilization_is_percent: bool = False
    utilization_source: str | None = None
    # A metric logged against each training run after it finished (by a monitoring job):
    # its history becomes that model's evaluations (app/evaluations).
    evaluations: str | None = None

    def sources(self, name: str) -> list[Source]:
        """Where to look for Cadence field ``name``, in order."""
        if name in self.fields:
            return [self.fields[name]]
        return [Source(section, name) for section in SECTIONS]


def parse_mapping(data: dict[str, Any], where: str = "mapping") -> Mapping:
    unknown = sorted(set(data) - TOP_LEVEL)
    if unknown:
        raise MappingError(
            f"{where}: unknown key(s) {', '.join(unknown)} "
            f"(allowed: {', '.join(sorted(TOP_LEVEL))})"
        )
    raw_fields = data.get("fields", {})
    if not isinstance(raw_fields, dict):
        raise MappingError(f'{where}: [fields] must be a table of field = "section.key"')
    unknown = sorted(set(raw_fields) - set(FIELDS))
    if unknown:
        raise MappingError(
            f"{where}: unknown field(s) in [fields]: {', '.join(unknown)} "
            f"(known: {', '.join(FIELDS)})"
        )
    fields: dict[str, Source] = {}
    for name, value in raw_fields.items():
        section, dot, key = str(value).partition(".") if isinstance(value, str) else ("", "", "")
        if not dot or section not in SECTIONS or not key:
            raise MappingError(
                f'{where}: fields.{name} = {value!r}: expected "metrics.KEY", '
                '"params.KEY" or "tags.KEY"'
            )
        fields[name] = Source(section, key)
    metric = data.get("quality_metric", "quality")
    if not isinstance(metric, str) or not metric or len(metric) > 100:
        raise MappingError(f"{where}: quality_metric must be a text of 1 to 100 characters")
    percent = data.get("utilization_is_percent", False)
    if not isinstance(percent, bool):
        raise MappingError(f"{where}: utilization_is_percent must be true or false")
    evaluations = data.get("evaluations")
    if evaluations is not None:
        section, dot, key = str(evaluations).partition(".")
        if not isinstance(evaluations, str) or section != "metrics" or not dot or not key:
            raise MappingError(f'{where}: evaluations = {evaluations!r}: expected "metrics.KEY"')
        evaluations = key
    source = data.get("utilization_source")
    if source is not None and source not in UTILIZATION_SOURCES:
        raise MappingError(
            f"{where}: utilization_source = {source!r}: expected one of "
            f"{', '.join(UTILIZATION_SOURCES)}"
        )
    return Mapping(
        fields=fields,
        quality_metric=metric,
        utilization_is_percent=percent,
        utilization_source=source,
        evaluations=evaluations,
    )


def load_mapping(path: Path) -> Mapping:
    try:
        import tomllib  # Python 3.11+
    except ImportError:  # older Pythons: the same parser, as the tomli package
        try:
            import tomli as tomllib  # type: ignore[no-redef,unused-ignore]
        except ImportError:
            raise MappingError(
                "reading a mapping file needs Python 3.11+ or `pip install tomli`"
            ) from None
    try:
        with path.open("rb") as handle:
            data = tomllib.load(handle)
    except OSError as exc:
        raise MappingError(f"cannot read {path}: {exc.strerror or exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise MappingError(f"{path}: not valid TOML: {exc}") from exc
    return parse_mapping(data, str(path))


class Skip(Exception):
    """This MLflow run cannot become a Cadence run; the message says why."""


@dataclass(frozen=True)
class Mapped:
    run_id: str
    payload: dict[str, Any] | None = None
    reason: str = ""  # set when skipped
    note: str = ""  # something the importer should say about an imported run


def run_id_of(run: dict[str, Any]) -> str:
    info = run.get("info") or {}
    return str(info.get("run_id") or info.get("run_uuid") or "?")


def map_run(
    run: dict[str, Any],
    pipeline: str,
    mapping: Mapping,
    variant_tag: str | None = None,
    history: History | None = None,
) -> Mapped:
    """The run payload of one MLflow run (as ``runs/search`` returns it), or the reason
    it is skipped. ``history(key)`` gives a metric's logged values (for utilization's
    mean over the run); without it the metric's last value is used."""
    run_id = run_id_of(run)
    try:
        payload = _payload(run, run_id, pipeline, mapping, variant_tag, history)
    except Skip as exc:
        return Mapped(run_id, reason=str(exc))
    note = (payload.get("tags") or {}).get(NOTE_TAG, "")
    return Mapped(run_id, payload=payload, note=note)


def _payload(
    run: dict[str, Any],
    run_id: str,
    pipeline: str,
    mapping: Mapping,
    variant_tag: str | None,
    history: History | None,
) -> dict[str, Any]:
    data = run.get("data") or {}
    if run_id == "?":
        raise Skip("no run_id")
    values = {section: _pairs(data.get(section)) for section in SECTIONS}
    outcome, started, finished, window = _attempt(run.get("info") or {})
    used: set[Source] = set()
    sources: dict[str, list[Source]] = {}
    if variant_tag:
        sources["variant"] = [Source("tags", variant_tag)]
    payload: dict[str, Any] = {
        "pipeline": pipeline,
        "run_id": run_id,
        "started_at": started.isoformat(),
        "finished_at": finished.isoformat(),
    }
    note = ""
    for name, target in FIELDS.items():
        searched = sources.get(name) or mapping.sources(name)
        found = next((s for s in searched if s.key in values[s.section]), None)
        if found is None:
            note += _unfound(
                name, target, payload, searched, mapping, outcome, values, window, history
            )
            continue
        used.add(found)
        raw = values[found.section][found.key]
        _set_field(payload, name, target, found, raw, mapping, window, history)
    payload.setdefault("variant", "baseline")
    if outcome != "succeeded":
        payload["outcome"] = outcome
    if "quality_value" in payload:
        payload["quality_metric"] = mapping.quality_metric
    tags = _tags(values["tags"], {s.key for s in used if s.section == "tags"})
    if note:  # kept on the run, so the page can say how its utilization was chosen
        tags = {**dict(list(tags.items())[: MAX_TAGS - 1]), NOTE_TAG: note[:TAG_VALUE_MAX]}
    if tags:
        payload["tags"] = tags
    return payload


def _attempt(info: dict[str, Any]) -> tuple[str, datetime, datetime, tuple[int, int]]:
    """The run's outcome, start, end and window (epoch milliseconds), or Skip."""
    status = str(info.get("status") or "UNKNOWN")
    start, end = info.get("start_time"), info.get("end_time")
    if end in (None, "", 0, "0"):
        raise Skip(f"no end_time (status {status})")
    outcome = OUTCOMES.get(status)
    if outcome is None:
        raise Skip(f"status {status} (FINISHED, FAILED and KILLED runs are imported)")
    if start in (None, "", 0, "0"):
        raise Skip("no start_time")
    started, finished = _time(start, "start_time"), _time(end, "end_time")
    if finished <= started:
        raise Skip("end_time is not after start_time")
    return outcome, started, finished, (int(start), int(end))


def _unfound(
    name: str,
    target: str,
    payload: dict[str, Any],
    searched: list[Source],
    mapping: Mapping,
    outcome: str,
    values: dict[str, dict[str, str]],
    window: tuple[int, int],
    history: History | None,
) -> str:
    """A field no mapped source holds: utilization from MLflow's system metrics when it
    has them; a Skip when the field is required (workers; utilization of a success).
    Returns the note of how the GPU series were chosen, if they were by how busy."""
    default_utilization = name == "gpu_utilization" and name not in mapping.fields
    per_gpu = per_gpu_keys(values["metrics"])
    if name == "workers" and per_gpu:
        payload[target] = len(per_gpu)  # no workers param: one series per GPU it ran on
        return ""
    if default_utilization:
        visible = values["params"].get(VISIBLE) or values["tags"].get(VISIBLE) or ""
        try:
            picked = pick(values["metrics"], visible, payload.get("workers"), window, history)
        except NotTheJobs as exc:
            if outcome == "succeeded":
                raise Skip(str(exc)) from exc
            return ""  # a failed attempt may lack utilization
        if picked.utilization is not None:
            payload[target] = picked.utilization
            payload["utilization_source"] = "nvml_gpu_util"
            return picked.note
    if name == "workers" or (name == "gpu_utilization" and outcome == "succeeded"):
        where = ", ".join(str(s) for s in searched)
        if default_utilization:
            where += f", metrics.{SYSTEM_UTILIZATION}"
        raise Skip(f"no {name} (looked for {where})")
    return ""


def _set_field(
    payload: dict[str, Any],
    name: str,
    target: str,
    source: Source,
    raw: str,
    mapping: Mapping,
    window: tuple[int, int],
    history: History | None,
) -> None:
    """One found value into the payload: text cleaned, numbers checked (Skip if bad)."""
    if name in TEXT_FIELDS:
        text = CONTROL.sub(" ", raw).strip()
        if text:
            payload[target] = text
        return
    if name == "gpu_utilization" and source.section == "metrics" and history is not None:
        raw = mean_over(history(source.key), window, raw)
    number = _number(raw, name, source)
    if name == "workers":
        if not number.is_integer():
            raise Skip(f"workers {raw!r} ({source}) is not a whole number")
        payload[target] = int(number)
        return
    if name == "gpu_utilization":
        number = _utilization(number, raw, source, mapping)
        if mapping.utilization_source:
            payload["utilization_source"] = mapping.utilization_source
    payload[target] = number


def _utilization(number: float, raw: str, source: Source, mapping: Mapping) -> float:
    if 1 < number <= 100:
        if not mapping.utilization_is_percent:
            raise Skip(
                f"gpu_utilization {number:g} ({source}) looks like a percentage; set "
                "utilization_is_percent = true in the mapping if it is one"
            )
        number = number / 100
    if not 0 <= number <= 1:
        raise Skip(f"gpu_utilization {raw} ({source}) is not a fraction between 0 and 1")
    return number


def _pairs(items: Any) -> dict[str, str]:
    """MLflow's ``[{"key": ..., "value": ...}]`` as a dict of text values."""
    out: dict[str, str] = {}
    for item in items or []:
        if isinstance(item, dict) and "key" in item:
            value = item.get("value")
            out[str(item["key"])] = "" if value is None else str(value)
    return out


# Epoch milliseconds of 1970-01-01 and 2200-12-31, the range the server stores.
LAST_MILLIS = 7_289_654_399_999


def _time(value: Any, name: str) -> datetime:
    """Epoch milliseconds as a time; 1e308, Infinity or a year past 2200 skip the run
    with its reason (``datetime.fromtimestamp`` raised OverflowError on them)."""
    try:
        millis = int(value)
    except (TypeError, ValueError, OverflowError) as exc:
        raise Skip(f"{name} {value!r} is not epoch milliseconds") from exc
    if not 0 < millis <= LAST_MILLIS:
        raise Skip(f"{name} {value!r} is not a time between 1970 and 2200 (epoch milliseconds)")
    return datetime.fromtimestamp(millis / 1000, timezone.utc)


def _number(raw: str, name: str, source: Source) -> float:
    try:
        number = float(raw)
    except ValueError as exc:
        raise Skip(f"{name} {raw!r} ({source}) is not a number") from exc
    if not math.isfinite(number):
        raise Skip(f"{name} {raw!r} ({source}) is not a finite number")
    return number


def _tags(tags: dict[str, str], consumed: set[str]) -> dict[str, str]:
    """MLflow tags except ``mlflow.*`` and those mapped to fields, truncated to Cadence's
    limits (50 tags by key order, key <= 100 and value <= 500 characters)."""
    out: dict[str, str] = {}
    for key in sorted(tags):
        if key.startswith("mlflow.") or key in consumed:
            continue
        short = CONTROL.sub(" ", key)[:TAG_KEY_MAX].strip()
        if not short or short in out:
            continue
        out[short] = CONTROL.sub(" ", tags[key])[:TAG_VALUE_MAX]
        if len(out) == MAX_TAGS:
            break
    return out
