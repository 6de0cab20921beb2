"""The mean retraining cost of many pipelines' production variants, kept between requests.

The portfolio, the weekly review and /metrics show every pipeline's monthly cost at its
current cadence, the expected bill: the mean retraining cost (a run plus its
retraining's failed attempts; a retraining abandoned after failed attempts at what they
cost) of the production variant's newest RUN_WINDOW retrainings
(``analytics.service.current_monthly_cost``) times the runs a month. Reading 5,000
such windows takes most of a second on 10 million runs, so each process keeps the means
it computed (``Database.caches``: one per database, so tests and tools that open several
never mix them), with what each depends on:

- the variant's change counter (``run_variant.changes``), which every write of one of
  its runs (insert, delete, measurement update) increases in the same transaction
  (``app.db.rollup``), read once per request for every pipeline's variants;
- the pipeline's current price, which prices runs that carry no price of their own;
- the variant's name (the production variant can be changed) and the window.

A mean is reused only while all of them are as read in the current transaction, so it
is exactly what a fresh computation would give; the others are computed in one query.
A retraining's attempts share its variant (a failed attempt moves the same counter).

The counter is read before the means, so a mean can only be newer than the counter
it is filed under; the next reader then sees a higher counter and computes again.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

from sqlalchemy.orm import Session

from app.analytics import repository as repo
from app.db import rollup_reads
from app.db.cost_reads import Series
from app.db.memo import kept, kept_view

# Above this many pipelines the counters of every pipeline are read (no list of ids to
# send) and the others dropped in Python.
ID_LIST_LIMIT = 1_000

Key = tuple[int, str, int]  # pipeline id, variant, window
Entry = tuple[int, float, Series]  # change counter, pipeline price, series


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


def mean_costs(session: Session, pipelines: Sequence[Costed], window: int) -> dict[int, float]:
    """Mean retraining cost (USD) of each pipeline's production variant's newest ``window``
    runs, by pipeline id; a pipeline whose production variant has no runs is absent."""
    found = windows(session, pipelines, window).items()
    return {pid: math.fsum(c for c, _, _ in w) / len(w) for pid, w in found}


def windows(session: Session, pipelines: Sequence[Costed], window: int) -> dict[int, Series]:
    """The cost series (cost, extra attempts' cost, start; oldest first) of each
    pipeline's production variant's newest ``window`` retrainings, abandoned ones
    included, by pipeline id: what the bill draws from. A pipeline whose production
    variant has no runs is absent."""
    if not pipelines:
        return {}
    ids = None if len(pipelines) > ID_LIST_LIMIT else [p.id for p in pipelines]
    changes = rollup_reads.change_counters(session, ids).by_variant
    cache: dict[Key, Entry] = kept(session, "recent_costs")
    seen = kept_view(session, "recent_costs")  # a write session looks up, never stores
    out: dict[int, Series] = {}
    stale: dict[int, tuple[Key, tuple[int, float]]] = {}
    for p in pipelines:
        counter = changes.get((p.id, p.production_variant))
        if counter is None:
            continue  # no runs of the production variant ever stored
        key = (p.id, p.production_variant, window)
        stamp = (counter, p.price_per_gpu_hour)
        entry = seen.get(key)
        if entry is None or entry[:2] != stamp:
            stale[p.id] = (key, stamp)
        elif entry[2]:
            out[p.id] = entry[2]
    if stale:
        fresh = repo.recent_costs(session, {pid: k[1] for pid, (k, _) in stale.items()}, window)
        for pid, (key, (counter, price)) in stale.items():
            found = cache[key] = (counter, price, fresh.get(pid, ()))
            if found[2]:
                out[pid] = found[2]
    return out
