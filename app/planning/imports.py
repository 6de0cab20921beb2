"""What an import would store, per pipeline (the ``--dry-run`` table). Pure.

Every attempt counts, whatever its outcome; GPU-hours are workers x wall clock of each
attempt (what it is billed for); a retraining is the attempts sharing a retraining id.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

OUTCOMES = ("succeeded", "failed", "preempted", "cancelled")


@dataclass(frozen=True)
class Attempt:
    pipeline: str
    retraining: str
    outcome: str
    workers: int
    wall_clock_hours: float
    has_utilization: bool


@dataclass
class PipelineTotals:
    attempts: int = 0
    by_outcome: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OUTCOMES, 0))
    gpu_hours: float = 0.0
    without_utilization: int = 0
    retrainings: set[str] = field(default_factory=set)


def totals(attempts: Iterable[Attempt]) -> dict[str, PipelineTotals]:
    """Per pipeline. Worked: two attempts of one retraining, 8 GPUs x 14 h succeeded and
    1 GPU x 1.5 h preempted -> 1 retraining, 2 attempts, 112 + 1.5 = 113.5 GPU-hours."""
    found: dict[str, PipelineTotals] = {}
    for a in attempts:
        row = found.setdefault(a.pipeline, PipelineTotals())
        row.attempts += 1
        row.by_outcome[a.outcome] = row.by_outcome.get(a.outcome, 0) + 1
        row.gpu_hours += a.workers * a.wall_clock_hours
        row.without_utilization += not a.has_utilization
        row.retrainings.add(a.retraining)
    return found
