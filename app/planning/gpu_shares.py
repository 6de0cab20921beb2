"""What a Kubernetes GPU request is in whole GPUs, and a Kueue workload's admissions
laid out as attempts. Pure.

GPUs: ``nvidia.com/gpu`` and ``amd.com/gpu`` count whole devices; a MIG slice
(``nvidia.com/mig-1g.10gb``) counts its compute slices over the GPU's (1g on an
A100-80GB is 1/7 of its GPU-hours; on an A30, 1/4); a time-sliced share
(``nvidia.com/gpu.shared``, the device plugin's ``renameByDefault``) counts
1 / the replicas per GPU the cluster's time-slicing config sets.

Admissions: Kubernetes resets a Job's ``startTime`` when Kueue resumes it, so the last
admission is all the owner shows. Kueue keeps the seconds of the earlier admissions
(``accumulatedPastExecutionTimeSeconds``) and how often it evicted the workload. The
earlier admissions become preempted attempts of that many hours in total, and the time
from creation to the last admission that was not running is queue wait, split evenly
over the admissions (Kueue keeps no earlier timestamps).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from fractions import Fraction

WHOLE = ("nvidia.com/gpu", "amd.com/gpu")
SHARED = "nvidia.com/gpu.shared"
MIG = re.compile(r"^nvidia\.com/mig-(\d)g\.(\d+)gb(?:\+me)?$")
# Memory sizes of a slice on GPUs with 4 compute slices (A30-24GB); the others have 7
# (A100 40/80 GB, H100, H200, B200, GH200: NVIDIA's MIG user guide, supported profiles).
FOUR_SLICE_GPUS = {(1, 6), (2, 12), (4, 24)}
# A table laid out by hand: one line per count of compute slices.
SEVEN_SLICE_SIZES = {
    (1, 5), (1, 10), (1, 12), (1, 18), (1, 20), (1, 23), (1, 24), (1, 35), (1, 45),
    (2, 10), (2, 20), (2, 24), (2, 35), (2, 45),
    (3, 20), (3, 40), (3, 48), (3, 71), (3, 90),
    (4, 20), (4, 40), (4, 48), (4, 71), (4, 90),
    (7, 40), (7, 80), (7, 96), (7, 141), (7, 180),
}  # fmt: skip


class ShareError(ValueError):
    """A GPU resource whose size is not known (an unknown MIG profile, say)."""


def gpu_fraction(resource: str, shares_per_gpu: int | None = None) -> Fraction | None:
    """The GPUs in one unit of a resource; None when the resource is not a GPU."""
    if resource in WHOLE:
        return Fraction(1)
    if resource == SHARED:
        if not shares_per_gpu:
            raise ShareError(f"{resource} needs --shares-per-gpu (the time-slicing replicas)")
        return Fraction(1, shares_per_gpu)
    match = MIG.match(resource)
    if match is None:
        return None
    size = (int(match.group(1)), int(match.group(2)))
    if size in FOUR_SLICE_GPUS:
        return Fraction(size[0], 4)
    if size in SEVEN_SLICE_SIZES:
        return Fraction(size[0], 7)
    raise ShareError(f"{resource}: a MIG profile not in the table of profiles")


@dataclass(frozen=True)
class Gpus:
    devices: int  # devices or slices held (the attempt's workers)
    whole: Fraction  # what they are in whole GPUs (GPU-hours per hour)
    share: str = ""  # how a share was counted, for the attempt's tags; "" for whole GPUs


def count_gpus(usage: dict[str, int], shares_per_gpu: int | None = None) -> Gpus:
    """Devices and whole GPUs of ``{resource: quantity}``; non-GPU resources ignored.

    Example: {"nvidia.com/mig-1g.10gb": 2} is 2 slices of 1/7: 2 devices, 2/7 GPU.
    """
    devices, whole, words = 0, Fraction(0), []
    for resource, quantity in sorted(usage.items()):
        fraction = gpu_fraction(resource, shares_per_gpu)
        if fraction is None or quantity <= 0:
            continue
        devices += quantity
        whole += fraction * quantity
        if fraction != 1:
            words.append(f"{quantity} x {resource.split('/')[1]} = {fraction} GPU each")
    return Gpus(devices, whole, "; ".join(words))


@dataclass(frozen=True)
class Admission:
    started: datetime
    finished: datetime
    wait_hours: float
    evicted: bool  # ended by a Kueue eviction (a preempted attempt)


def admissions(
    created: datetime,
    last_admitted: datetime,
    finished: datetime,
    past_seconds: int,
    evictions: int,
) -> list[Admission]:
    """The admissions of one workload, oldest first.

    Example (the primer's check): created 00:00, ran 00:30-02:30, preempted, admitted
    again 03:00, finished 05:00. Kueue shows last admission 03:00, 7200 past seconds and
    1 eviction: before the last admission 3 h passed, 2 h running, so 1 h waiting, 0.5 h
    per admission: [00:30, 02:30] evicted and [03:00, 05:00], waits 0.5 + 0.5 = 1 h.
    """
    before = max(0.0, (last_admitted - created).total_seconds())
    if evictions < 1 or past_seconds <= 0:
        return [Admission(last_admitted, finished, before / 3600, False)]
    ran = min(float(past_seconds), before)  # never more than the time there was
    wait = (before - ran) / (evictions + 1)
    each = ran / evictions
    found, at = [], created
    for _ in range(evictions):
        start = at + timedelta(seconds=wait)
        at = start + timedelta(seconds=each)
        found.append(Admission(start, at, wait / 3600, True))
    return [*found, Admission(last_admitted, finished, wait / 3600, False)]
