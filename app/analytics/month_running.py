"""What this month holds besides finished spend and the retrainings still to start: the
attempts running now and the experiments' pace (docs/methodology.md §5.4), read for
``app.analytics.month`` (org-wide, kept with the month's inputs; one pipeline, kept by
its change count, production variant and day)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Protocol

from sqlalchemy.orm import Session

from app.analytics import repository
from app.db import running_reads
from app.db.kept import KeptMap
from app.planning.running import (
    EXPERIMENT_DAYS,
    Running,
    RunningNow,
    days_left_in_month,
    elapsed_hours,
    experiments_expected,
    running_now,
    usual_hours,
)
from app.planning.scenario import RUN_WINDOW

# One pipeline's extras by id while its change count, production variant and day are as read.
KEPT_EXTRAS: KeptMap[int, Extras] = KeptMap("month_extras")


class Produced(Protocol):
    @property
    def id(self) -> int: ...
    @property
    def production_variant(self) -> str: ...


@dataclass(frozen=True)
class Extras:
    """The attempts running now (started this month), how long the production variant's
    retrainings usually take (None: nothing runs), and each variant's finished attempts
    and their cost in the last EXPERIMENT_DAYS (the experiments' pace)."""

    running: tuple[running_reads.RunningRow, ...] = ()
    usual_hours: float | None = None
    recent: tuple[tuple[str, tuple[int, float]], ...] = ()

    def clock(self, now: datetime, hour: datetime | None = None) -> datetime | None:
        """The moment the answer is computed at, part of its key: ``now`` while an
        attempt runs (its cost so far moves), the hour when only experiments are paced
        (their days left: recomputed hourly, not on every request), None otherwise.
        ``hour``: ``now``'s hour, when the caller has it (org-wide: one for 5,000)."""
        if self.running:
            return now
        if not self.recent:
            return None
        return hour if hour is not None else now.replace(minute=0, second=0, microsecond=0)

    def parts(self, production: str, typical_usd: float, now: datetime) -> tuple[RunningNow, float]:
        """The running attempts' part of the month (a whole retraining costs
        ``typical_usd``) and the experiments' expected rest of it."""
        attempts = [
            Running(r.variant, r.workers, elapsed_hours(r.started_at, now), r.price_per_gpu_hour)
            for r in self.running
        ]
        running = running_now(attempts, production, typical_usd, self.usual_hours)
        rest = experiments_expected(dict(self.recent), production, days_left_in_month(now))
        return running, rest


NO_EXTRAS = Extras()


def day_of(now: datetime) -> date:
    return now.astimezone(UTC).date()


def extras_of(
    session: Session,
    pipelines: Sequence[Produced],
    ids: list[int] | None,
    now: datetime,
    window: int,
) -> dict[int, Extras]:
    """The running attempts and the recent experiments of these pipelines (``ids``:
    their ids, None for every pipeline), and for those running a production attempt how
    long its retrainings usually take (one read each: few pipelines run at once)."""
    first = datetime.combine(day_of(now).replace(day=1), datetime.min.time(), tzinfo=UTC)
    # From the start of the day EXPERIMENT_DAYS ago: the same all day, so kept by the day.
    today = datetime.combine(day_of(now), datetime.min.time(), tzinfo=UTC)
    lately = running_reads.running_and_recent(
        session, ids, first, today - timedelta(days=EXPERIMENT_DAYS)
    )
    out = {}
    for p in pipelines:
        mine = lately.running.get(p.id, ())
        usual = None
        if any(r.variant == p.production_variant for r in mine):
            hours = running_reads.recent_wall_clocks(session, p.id, p.production_variant, window)
            usual = usual_hours(hours)
        variants = tuple(sorted(lately.recent.get(p.id, {}).items()))
        if mine or variants:
            out[p.id] = Extras(mine, usual, variants)
    return out


def page_extras(session: Session, p: Produced, now: datetime) -> Extras:
    """:func:`extras_of` one pipeline, kept between requests under its change count (read
    with its variant statistics, already read by the page), production variant and day."""
    key = (repository.variants(session, p.id)[1], p.production_variant, day_of(now))
    return KEPT_EXTRAS.get(
        session,
        (p.id, key),
        lambda: extras_of(session, [p], [p.id], now, RUN_WINDOW).get(p.id, NO_EXTRAS),
    )


def typical_cost(costs: Sequence[float]) -> float:
    """A whole retraining, for an attempt still running: the window's mean cost."""
    return math.fsum(costs) / len(costs) if costs else 0.0
