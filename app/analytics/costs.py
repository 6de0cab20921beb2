"""The windows of retraining costs of many pipelines' production variants, kept between
requests.

The month to date and today's expected bill (``app.analytics.month``,
``app.analytics.bill_now``) of every pipeline are forecast from the cost series of its
production variant's newest RUN_WINDOW retrainings (a run plus its retraining's failed
attempts; a retraining abandoned after failed attempts at what they cost). Reading 5,000
such windows takes most of a second on 10 million runs, so each process keeps the series
it read (the kept map ``recent_costs``, app/db/kept.py), with what each depends on:

- the variant's change counter (``run_variant.changes``), which every write of one of
  its runs (insert, delete, measurement update) increases in the same transaction
  (``app.db.rollup``), read once per request for every pipeline's variants;
- the pipeline's current price, which prices runs that carry no price of their own;
- the variant's name (the production variant can be changed) and the window.

A series is reused only while all of them are as read in the current transaction, so it
is exactly what a fresh computation would give; the others are computed in one query.
A retraining's attempts share its variant (a failed attempt moves the same counter).

The counter is read before the series, so a series can only be newer than the counter
it is filed under; the next reader then sees a higher counter and reads again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from sqlalchemy.orm import Session

from app.analytics import repository as repo
from app.db import rollup_reads
from app.db.cost_reads import Series
from app.db.kept import KeptMap

# Above this many pipelines the counters of every pipeline are read (no list of ids to
# send) and the others dropped in Python.
ID_LIST_LIMIT = 1_000

Slot = tuple[int, str, int]  # pipeline id, production variant, window
# The series by (pipeline id, production variant, window) while the variant's change
# counter and the pipeline's price are as read.
KEPT_COSTS: KeptMap[Slot, Series] = KeptMap("recent_costs")


class Costed(Protocol):
    """What a monthly cost needs of a pipeline: an ORM ``Pipeline`` or a lighter row
    (``app.pipelines.service.Brief``)."""

    @property
    def id(self) -> int: ...
    @property
    def production_variant(self) -> str: ...
    @property
    def price_per_gpu_hour(self) -> float: ...
    @property
    def runs_per_week(self) -> float: ...


def windows(session: Session, pipelines: Sequence[Costed], window: int) -> dict[int, Series]:
    """The cost series (cost, extra attempts' cost, start; oldest first) of each
    pipeline's production variant's newest ``window`` retrainings, abandoned ones
    included, by pipeline id: what the bill draws from. A pipeline whose production
    variant has no runs is absent."""
    if not pipelines:
        return {}
    ids = None if len(pipelines) > ID_LIST_LIMIT else [p.id for p in pipelines]
    changes = rollup_reads.change_counters(session, ids).by_variant
    keys: dict[Slot, object] = {}
    for p in pipelines:
        counter = changes.get((p.id, p.production_variant))
        if counter is not None:  # else no run of the production variant was ever stored
            keys[(p.id, p.production_variant, window)] = (counter, p.price_per_gpu_hour)

    def read(stale: list[Slot]) -> dict[Slot, Series]:
        fresh = repo.recent_costs(session, {pid: variant for pid, variant, _ in stale}, window)
        return {slot: fresh.get(slot[0], ()) for slot in stale}

    found = KEPT_COSTS.get_many(session, keys.items(), read)
    return {slot[0]: series for slot, series in found.items() if series}
