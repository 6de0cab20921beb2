"""How many GPUs one unit of a bill line is: the GPU line items of a cloud bill.

A FOCUS line names what it charges for in free text (ChargeDescription, SkuMeter,
SkuPriceDetails, the clouds' own x_ columns such as AWS's x_UsageType or Azure's
x_SkuMeterName). An instance type counts its GPUs per instance-hour; a GPU sold on
its own (GCP bills "Nvidia Tesla A100 GPU running in Americas" per GPU-hour) counts one.
A line that names neither is not a GPU line and is not imported. Pure.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction

# Instance types with their GPUs per instance, a fraction for part of one GPU (AWS g6f,
# Azure NVadsA10 v5): the rows of app/billing/gpu_catalog.csv, read there
# (app/billing/gpu_catalog.py) and handed to the functions below.
CLOUDS = ("aws", "azure", "gcp")


@dataclass(frozen=True)
class CatalogEntry:
    cloud: str
    instance_type: str
    accelerator: str
    gpus: float
    source: str  # "hand" (the provider's pages) or "skypilot" (the refresh)


@dataclass(frozen=True)
class Catalog:
    """GPUs per instance type by cloud: AWS names lower-cased, Azure's without their
    "Standard_" prefix (bills write both), GCP's lower-cased."""

    aws: Mapping[str, float]
    azure: Mapping[str, float]
    gcp: Mapping[str, float]
    # Azure's names squashed as bills may write them, the longest first (so a short name
    # is not found inside a longer one): made once, not on every line read.
    azure_longest_first: tuple[tuple[str, float], ...] = ()

    @classmethod
    def of(cls, entries: Iterable[CatalogEntry]) -> Catalog:
        rows = list(entries)
        azure = {
            e.instance_type.removeprefix("Standard_"): e.gpus for e in rows if e.cloud == "azure"
        }
        squashed = {_azure_key(k): v for k, v in azure.items()}
        return cls(
            {e.instance_type.lower(): e.gpus for e in rows if e.cloud == "aws"},
            azure,
            {e.instance_type.lower(): e.gpus for e in rows if e.cloud == "gcp"},
            tuple(sorted(squashed.items(), key=lambda kv: -len(kv[0]))),
        )


def parse_gpus(text: str) -> float:
    """A GPU count as the catalog writes it: ``8``, ``0.5`` or ``1/6``; above 0."""
    value = float(Fraction(text.strip()))
    if not (math.isfinite(value) and 0 < value <= 64):
        raise ValueError(f"a GPU count above 0 and at most 64, not {text!r}")
    return value


# Other sizes of these families hold one GPU.
AWS_SINGLE = re.compile(r"\b(?:g4dn|g4ad|g5|g5g|g6|g6e)\.(?:\d*x?large)\b", re.IGNORECASE)
# GCP accelerator-optimised machines end in their GPU count: a2-highgpu-8g, a3-megagpu-8g.
GCP = re.compile(r"\ba(?:[234]|4x)-(?:high|mega|ultra|edge)gpu-(\d+)g\b", re.IGNORECASE)
GCP_G2_SINGLE = re.compile(r"\bg2-standard-(?:4|8|12|16|32)\b", re.IGNORECASE)
# Names in the GPU families of the three clouds, known or not (for the notice).
GPU_FAMILY = re.compile(
    r"\b(?:[pg]\d+[a-z0-9-]*\.(?:\d*x?large|metal)"
    r"|(?:standard_)?n[cdvg]\d+[a-z]*_\w+"
    r"|a\d[a-z]*-[a-z]+gpu-\d+g|g\d-standard-\d+)\b",
    re.IGNORECASE,
)
SINGLE_GPU = re.compile(
    r"\b(?:nvidia|tesla)\b[^,;]*\b(?:gpu|a100|h100|h200|l4|t4|v100|b200)\b", re.IGNORECASE
)


def _azure_key(text: str) -> str:
    return re.sub(r"[\s_-]+", "_", text.lower())


def gpus_per_unit(texts: Iterable[str], catalog: Catalog) -> float | None:
    """GPUs in one hour of the line's unit (a fraction for part of one GPU), or None
    when the texts name no GPU."""
    text = " ".join(t for t in texts if t)
    lowered = text.lower()
    for name, gpus in catalog.aws.items():
        if re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w.])", lowered):
            return gpus
    if AWS_SINGLE.search(text):
        return 1
    squashed = _azure_key(text)
    for key, gpus in catalog.azure_longest_first:
        if key in squashed:
            return gpus
    match = GCP.search(text)
    if match:
        return int(match.group(1))
    for name, gpus in catalog.gcp.items():
        if re.search(rf"\b{name}\b", lowered):
            return gpus
    if GCP_G2_SINGLE.search(text):
        return 1
    if SINGLE_GPU.search(text):
        return 1
    return None


def unknown_gpu_types(texts: Iterable[str], catalog: Catalog) -> set[str]:
    """Instance types in a GPU family (AWS p*/g*, Azure N-series, GCP a*/g2) that the
    catalog does not know: their lines are not counted as GPU spend, so the import names
    them."""
    text = " ".join(t for t in texts if t)
    found = GPU_FAMILY.finditer(text)
    return {m.group(0) for m in found if gpus_per_unit([m.group(0)], catalog) is None}
