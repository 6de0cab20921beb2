"""What the planning answers read of one pipeline's runs, read once (``RunReads``).

A request reads its pipeline's variant statistics (one GROUP BY), then, in one
statement, the windows it needs: the newest RUN_WINDOW planning runs of each variant it
names (plus the production variant and the defaults), the newest runs of any variant,
and the scaling variant's worker counts and wall clocks. Every answer in
``app.analytics.service`` and ``advice`` is computed from this object, so a page with
six sections reads the runs twice, not once a section.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy.orm import Session

from app.analytics import repository as repo
from app.analytics.prior import org_prior
from app.analytics.repository import RunRow, VariantStats
from app.db.cost_reads import Series
from app.db.models import Pipeline
from app.planning.cost_series import FIXED_PRIOR, OrgPrior
from app.planning.scaling import ScalingPoint
from app.planning.scenario import RUN_WINDOW

__all__ = ["FailureExposure", "RunReads", "RunRow", "change_count", "default_variants", "read_runs"]


@dataclass(frozen=True)
class FailureExposure:
    interruptions: int
    instance_hours: float
    mean_lost_progress_hours: float | None
    mean_restart_hours: float | None


def default_variants(names: list[str], production: str = "baseline") -> list[str]:
    """The production variant (or the most-run variant), then candidate when there is one."""
    if not names:
        return []
    first = production if production in names else names[0]
    rest = ["candidate"] if "candidate" in names and first != "candidate" else []
    return [first, *rest]


@dataclass(frozen=True)
class RunReads:
    variants: tuple[VariantStats, ...]  # most-run first
    windows: dict[str, list[RunRow]]  # newest RUN_WINDOW planning runs, oldest first
    recent: list[RunRow]  # the newest planning runs of any variant, oldest first
    scaling_variant: str | None  # the variant with the most worker counts (at least two)
    scaling_points: tuple[ScalingPoint, ...]
    abandoned: dict[str, list[tuple[float, float, datetime]]] = field(default_factory=dict)
    latest_change: datetime | None = None  # the latest declared change (price setting)
    prior: OrgPrior = FIXED_PRIOR  # what a small window borrows (``prior.org_prior``)

    @property
    def names(self) -> list[str]:
        return [v.variant for v in self.variants]

    @property
    def total_runs(self) -> int:
        return sum(v.runs for v in self.variants)

    @property
    def latest_start(self) -> datetime | None:
        return max((v.last_started_at for v in self.variants), default=None)

    def series(self, variant: str) -> Series:
        """The variant's cost series as ``app.analytics.costs.windows`` reads it: its
        window's retrainings and the abandoned ones, oldest first, the newest
        RUN_WINDOW of them (cost, extra attempts' cost, start)."""
        rows = [
            (r.facts.retraining_cost_usd, r.facts.failed_attempts_cost_usd, r.started_at)
            for r in self.window(variant)
        ]
        rows += self.abandoned.get(variant, [])
        return tuple(sorted(rows, key=lambda row: row[2])[-RUN_WINDOW:])

    def window(self, variant: str) -> list[RunRow]:
        """The variant's window: empty when it has no runs (or was not read)."""
        return self.windows.get(variant, [])

    def exposure(self) -> FailureExposure:
        """Interruptions against instance-hours (each worker counted as one instance)."""
        n = sum(v.interruptions for v in self.variants)
        lost = sum(v.lost_progress_hours for v in self.variants)
        restart = sum(v.restart_hours for v in self.variants)
        return FailureExposure(
            interruptions=n,
            instance_hours=sum(v.instance_hours for v in self.variants),
            mean_lost_progress_hours=lost / n if n else None,
            mean_restart_hours=restart / n if n else None,
        )


def change_count(session: Session, pipeline: Pipeline) -> int:
    """The pipeline's change count (the sum of its variants' change counters), read with the
    variant statistics :func:`read_runs` starts from (one statement, kept for the
    session): what is kept from its runs is filed under it, read before them."""
    return repo.variants(session, pipeline.id)[1]


def read_runs(
    session: Session,
    pipeline: Pipeline,
    variants: Iterable[str | None] = (),
    *,
    recent: int = RUN_WINDOW,
    scaling: str | None = None,
) -> RunReads:
    """The pipeline's runs as the planning answers need them: ``variants`` (None: the
    defaults) beside the production variant and the defaults, the newest ``recent`` (at
    least RUN_WINDOW: the scaling advice's fallback), and the scaling fit's points of
    ``scaling`` (default: the variant with the most worker counts)."""
    stats_, _, latest_change = repo.variants(session, pipeline.id)
    stats = tuple(stats_)
    names = [v.variant for v in stats]
    wanted = [pipeline.production_variant, *default_variants(names, pipeline.production_variant)]
    wanted += [v for v in variants if v is not None]
    chosen = [v for v in dict.fromkeys(wanted) if v in names]
    if scaling is None:
        spread = [v for v in stats if v.worker_counts >= 2]
        scaling = max(spread, key=lambda v: (v.worker_counts, v.runs)).variant if spread else None
    if not stats:
        return RunReads(stats, {}, [], scaling, ())
    found = repo.windows(
        session,
        pipeline.id,
        chosen,
        limit=RUN_WINDOW,
        recent=max(recent, RUN_WINDOW),
        scaling=scaling if scaling in names else None,
    )
    points = tuple(ScalingPoint(w, t) for w, t in found.worker_times if t > 0)
    return RunReads(
        stats,
        found.by_variant,
        found.recent,
        scaling,
        points,
        found.abandoned,
        latest_change,
        org_prior(session),
    )
