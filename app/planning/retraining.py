"""Attempts grouped into scheduled retraining (docs/methodology.md §5.1).

A run record is one *attempt*. Every attempt is paid in full, whatever its outcome; the
attempts that share a ``retraining_id`` are one scheduled retraining, whose cost is the
sum of its attempts' costs. A budget is a limit on that sum, so the bill forecast
(app/planning/bill.py) draws retraining costs, not attempt costs: a retraining whose
first attempt failed costs both attempts.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from app.planning.model import PlanningError


class Outcome(StrEnum):
    """How an attempt ended. Only ``succeeded`` attempts give a retraining its quality."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    PREEMPTED = "preempted"
    CANCELLED = "cancelled"


@dataclass(frozen=True)
class Attempt:
    """One run record as the grouping needs it. ``retraining_id`` defaults, at the
    caller, to the run's own id; ``quality`` may be None (a crash before evaluation)."""

    retraining_id: str
    outcome: Outcome
    cost_usd: float
    started_at: datetime
    quality: float | None = None

    def __post_init__(self) -> None:
        if not (math.isfinite(self.cost_usd) and self.cost_usd >= 0):
            raise PlanningError(f"attempt cost must be finite and >= 0, got {self.cost_usd}")
        if not isinstance(self.outcome, Outcome):
            object.__setattr__(self, "outcome", _outcome(self.outcome))


def _outcome(value: object) -> Outcome:
    try:
        return Outcome(str(value))
    except ValueError:
        known = ", ".join(o.value for o in Outcome)
        raise PlanningError(f"outcome must be one of {known}, got {value!r}") from None


@dataclass(frozen=True)
class Retraining:
    """Attempts sharing one ``retraining_id``.

    - ``cost_usd``: sum of the attempts' costs (each paid in full);
    - ``failed_cost_usd``: the part paid for attempts that did not succeed;
    - ``started_at``: the first attempt's start (the month it is billed to in a
      forecast is decided per attempt by the spend, not here);
    - ``quality``: the succeeded attempt's (the latest, if several succeeded), None
      while no attempt has succeeded;
    - ``succeeded``: whether any attempt succeeded.
    """

    retraining_id: str
    attempts: int
    cost_usd: float
    failed_cost_usd: float
    started_at: datetime
    quality: float | None
    succeeded: bool


# Not called by the app: the library call docs/bill.md documents (tests/planning check it).
def group_retrainings(attempts: Iterable[Attempt]) -> list[Retraining]:
    """Group attempts by ``retraining_id``; the result is ordered by first start.

    Example: attempts A1 (failed, $200, Mon 09:00) and A2 (succeeded, $100, Mon 15:00,
    quality 0.91) of retraining "r1" give one Retraining: cost $300, failed cost $200,
    start Mon 09:00, quality 0.91.
    """
    groups: dict[str, list[Attempt]] = {}
    for attempt in attempts:
        groups.setdefault(attempt.retraining_id, []).append(attempt)
    out = [_retraining(rid, group) for rid, group in groups.items()]
    out.sort(key=lambda r: (r.started_at, r.retraining_id))
    return out


def _retraining(retraining_id: str, group: list[Attempt]) -> Retraining:
    group = sorted(group, key=lambda a: a.started_at)
    succeeded = [a for a in group if a.outcome is Outcome.SUCCEEDED]
    quality = succeeded[-1].quality if succeeded else None
    return Retraining(
        retraining_id=retraining_id,
        attempts=len(group),
        cost_usd=math.fsum(a.cost_usd for a in group),
        failed_cost_usd=math.fsum(a.cost_usd for a in group if a.outcome is not Outcome.SUCCEEDED),
        started_at=group[0].started_at,
        quality=quality,
        succeeded=bool(succeeded),
    )


# Not called by the app: the library call docs/bill.md documents (tests/planning check it).
def recent_window(retrainings: Iterable[Retraining], size: int = 20) -> list[Retraining]:
    """The ``size`` most recently started retrainings that have finished (some attempt
    succeeded): the window a forecast resamples. A retraining still failing has not yet
    reached its final cost, so it is left out rather than priced low."""
    if size < 1:
        raise PlanningError("window size must be >= 1")
    done = [r for r in retrainings if r.succeeded]
    done.sort(key=lambda r: (r.started_at, r.retraining_id))
    return done[-size:]
