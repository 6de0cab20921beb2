"""How many GPUs one unit of a bill line is: the GPU line items of a cloud bill.

A FOCUS line names what it charges for in free text (ChargeDescription, SkuMeter,
SkuPriceDetails, the clouds' own x_ columns such as AWS's x_UsageType or Azure's
x_SkuMeterName). An instance type counts its GPUs per instance-hour; a GPU sold on
its own (GCP bills "Nvidia Tesla A100 GPU running in Americas" per GPU-hour) counts one.
A line that names neither is not a GPU line and is not imported. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

# Instance types with their GPUs per instance (AWS, Azure, GCP pages of instance types).
AWS = {
    "p6-b200.48xlarge": 8, "p5en.48xlarge": 8, "p5e.48xlarge": 8, "p5.48xlarge": 8,
    "p5.4xlarge": 1, "p4de.24xlarge": 8, "p4d.24xlarge": 8, "p3dn.24xlarge": 8,
    "p3.16xlarge": 8, "p3.8xlarge": 4, "p3.2xlarge": 1, "g6e.48xlarge": 8,
    "g6e.24xlarge": 4, "g6e.12xlarge": 4, "g6.48xlarge": 8, "g6.24xlarge": 4,
    "g6.12xlarge": 4, "g5.48xlarge": 8, "g5.24xlarge": 4, "g5.12xlarge": 4,
    "g4dn.metal": 8, "g4dn.12xlarge": 4,
    "p6-b300.48xlarge": 8, "p6e-gb200.36xlarge": 4, "g5g.16xlarge": 2, "g5g.metal": 2,
    "g4ad.16xlarge": 4, "g4ad.8xlarge": 2,
}  # fmt: skip
# Other sizes of these families hold one GPU. (g6f sizes hold a fraction of an L4: not
# whole GPUs, so not here; they are named in the unknown-types notice.)
AWS_SINGLE = re.compile(r"\b(?:g4dn|g4ad|g5|g5g|g6|g6e)\.(?:\d*x?large)\b", re.IGNORECASE)
AZURE = {
    "ND96isr_H100_v5": 8, "ND96amsr_A100_v4": 8, "ND96asr_v4": 8, "ND96asr_A100_v4": 8,
    "NC96ads_A100_v4": 4, "NC48ads_A100_v4": 2, "NC24ads_A100_v4": 1,
    "NC40ads_H100_v5": 1, "NC80adis_H100_v5": 2, "NC24s_v3": 4, "NC12s_v3": 2,
    "NC6s_v3": 1, "ND96isr_H200_v5": 8, "NC4as_T4_v3": 1, "NC8as_T4_v3": 1,
    "NC16as_T4_v3": 1, "NC64as_T4_v3": 4, "NV36ads_A10_v5": 1, "NV36adms_A10_v5": 1,
    "NV72ads_A10_v5": 2,
}  # fmt: skip
# GCP accelerator-optimised machines end in their GPU count: a2-highgpu-8g, a3-megagpu-8g.
GCP = re.compile(r"\ba(?:[234]|4x)-(?:high|mega|ultra|edge)gpu-(\d+)g\b", re.IGNORECASE)
# G2 machines: one L4 up to g2-standard-32, then 2, 4 and 8.
GCP_G2 = {"g2-standard-24": 2, "g2-standard-48": 4, "g2-standard-96": 8}
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


AZURE_KEYS = {_azure_key(k): v for k, v in AZURE.items()}


def gpus_per_unit(texts: Iterable[str]) -> int | None:
    """GPUs in one hour of the line's unit, or None when the texts name no GPU."""
    text = " ".join(t for t in texts if t)
    lowered = text.lower()
    for name, gpus in AWS.items():
        if re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w.])", lowered):
            return gpus
    if AWS_SINGLE.search(text):
        return 1
    squashed = _azure_key(text)
    for key, gpus in sorted(AZURE_KEYS.items(), key=lambda kv: -len(kv[0])):
        if key in squashed:
            return gpus
    match = GCP.search(text)
    if match:
        return int(match.group(1))
    for name, gpus in GCP_G2.items():
        if re.search(rf"\b{name}\b", lowered):
            return gpus
    if GCP_G2_SINGLE.search(text):
        return 1
    if SINGLE_GPU.search(text):
        return 1
    return None


def unknown_gpu_types(texts: Iterable[str]) -> set[str]:
    """Instance types in a GPU family (AWS p*/g*, Azure N-series, GCP a*/g2) that the
    table does not know: their lines are not counted as GPU spend, so the import names
    them."""
    text = " ".join(t for t in texts if t)
    return {m.group(0) for m in GPU_FAMILY.finditer(text) if gpus_per_unit([m.group(0)]) is None}
