"""MLflow run -> Cadence run record (a ``RunIn`` payload), and the TOML mapping file.

Mapping file (every key optional)::

    quality_metric = "ndcg@10"          # Cadence's quality_metric (default "quality")
    utilization_is_percent = false      # true: 1 < gpu_utilization <= 100 is divided by 100

    evaluations = "metrics.live_ndcg"   # optional: the serving model's quality over its life

    [fields]                            # Cadence field = "metrics|params|tags.<MLflow key>"
    gpu_utilization = "metrics.gpu_util"
    workers = "params.num_gpus"
    quality = "metrics.val_ndcg"

A field without a mapping is looked up under its own name in metrics, then params, then
tags (e.g. ``params.workers``).
"""

from __future__ import annotations

import math
import re
import tomllib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from app.runs.schemas import MAX_TAGS, RunIn

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
TOP_LEVEL = {"evaluations", "fields", "quality_metric", "utilization_is_percent"}
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
    return Mapping(
        fields=fields,
        quality_metric=metric,
        utilization_is_percent=percent,
        evaluations=evaluations,
    )


def load_mapping(path: Path) -> Mapping:
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


def run_id_of(run: dict[str, Any]) -> str:
    info = run.get("info") or {}
    return str(info.get("run_id") or info.get("run_uuid") or "?")


def map_run(
    run: dict[str, Any], pipeline: str, mapping: Mapping, variant_tag: str | None = None
) -> Mapped:
    """The RunIn payload of one MLflow run (as ``runs/search`` returns it), or the
    reason it is skipped."""
    run_id = run_id_of(run)
    try:
        payload = _payload(run, run_id, pipeline, mapping, variant_tag)
    except Skip as exc:
        return Mapped(run_id, reason=str(exc))
    return Mapped(run_id, payload=payload)


def _payload(
    run: dict[str, Any], run_id: str, pipeline: str, mapping: Mapping, variant_tag: str | None
) -> dict[str, Any]:
    info = run.get("info") or {}
    data = run.get("data") or {}
    if run_id == "?":
        raise Skip("no run_id")
    values = {section: _pairs(data.get(section)) for section in SECTIONS}
    status = str(info.get("status") or "UNKNOWN")
    start, end = info.get("start_time"), info.get("end_time")
    if end in (None, "", 0, "0"):
        raise Skip(f"no end_time (status {status})")
    if status != "FINISHED":
        raise Skip(f"status {status} (only FINISHED runs are imported)")
    if start in (None, "", 0, "0"):
        raise Skip("no start_time")
    started, finished = _time(start, "start_time"), _time(end, "end_time")
    if finished <= started:
        raise Skip("end_time is not after start_time")

    used: set[Source] = set()

    def lookup(name: str) -> tuple[Source, str] | None:
        for source in sources.get(name) or mapping.sources(name):
            if source.key in values[source.section]:
                used.add(source)
                return source, values[source.section][source.key]
        return None

    sources: dict[str, list[Source]] = {}
    if variant_tag:
        sources["variant"] = [Source("tags", variant_tag)]

    payload: dict[str, Any] = {
        "pipeline": pipeline,
        "run_id": run_id,
        "started_at": started.isoformat(),
        "finished_at": finished.isoformat(),
    }
    for name, target in FIELDS.items():
        found = lookup(name)
        if found is None:
            if name in ("workers", "gpu_utilization"):
                where = ", ".join(str(s) for s in sources.get(name) or mapping.sources(name))
                raise Skip(f"no {name} (looked for {where})")
            continue
        source, raw = found
        if name in TEXT_FIELDS:
            text = CONTROL.sub(" ", raw).strip()
            if text:
                payload[target] = text
            continue
        number = _number(raw, name, source)
        if name == "workers":
            if not number.is_integer():
                raise Skip(f"workers {raw!r} ({source}) is not a whole number")
            payload[target] = int(number)
            continue
        if name == "gpu_utilization" and 1 < number <= 100:
            if not mapping.utilization_is_percent:
                raise Skip(
                    f"gpu_utilization {number:g} ({source}) looks like a percentage; set "
                    "utilization_is_percent = true in the mapping if it is one"
                )
            number = number / 100
        payload[target] = number
    payload.setdefault("variant", "baseline")
    if "quality_value" in payload:
        payload["quality_metric"] = mapping.quality_metric
    tags = _tags(values["tags"], {s.key for s in used if s.section == "tags"})
    if tags:
        payload["tags"] = tags
    try:
        RunIn.model_validate(payload)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
        )
        raise Skip(f"invalid for Cadence: {problems}") from exc
    return payload


def _pairs(items: Any) -> dict[str, str]:
    """MLflow's ``[{"key": ..., "value": ...}]`` as a dict of text values."""
    out: dict[str, str] = {}
    for item in items or []:
        if isinstance(item, dict) and "key" in item:
            value = item.get("value")
            out[str(item["key"])] = "" if value is None else str(value)
    return out


def _time(value: Any, name: str) -> datetime:
    try:
        millis = int(value)
    except (TypeError, ValueError) as exc:
        raise Skip(f"{name} {value!r} is not epoch milliseconds") from exc
    return datetime.fromtimestamp(millis / 1000, UTC)


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
