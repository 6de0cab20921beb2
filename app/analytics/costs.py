"""The mean retraining cost of many pipelines' production variants, kept between requests.

The portfolio, the weekly review and /metrics show every pipeline's monthly cost at its
current cadence, the expected bill: the mean retraining cost (a run plus its
retraining's failed attempts) of the production variant's newest RUN_WINDOW runs
(``analytics.service.current_monthly_cost``) times the runs a month. Reading 5,000
such windows takes most of a second on 10 million runs, so each process keeps the means
it computed (``Database.caches``: one per database, so tests and tools that open several
never mix them), with what each depends on:

- the variant's change counter (``run_variant.changes``), which every insert or delete of
  one of its runs increases in the same transaction (``app.db.rollup``);
- the pipeline's current price, which prices runs that carry no price of their own;
- the variant's name (the production variant can be changed) and the window.

A mean is reused only while all of them are as read in the current transaction, so it
is exactly what a fresh computation would give; the others are computed in one query.
Runs are never updated in place, only inserted and deleted, and a retraining's attempts
share its variant (a failed attempt moves the same counter).

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
from app.db.memo import kept

# Above this many pipelines the counters of every pipeline are read (one join, no list of
# ids to send) and the others dropped in Python.
ID_LIST_LIMIT = 1_000

Key = tuple[int, str, int]  # pipeline id, variant, window
Entry = tuple[int, float, tuple[float, ...]]  # change counter, pipeline price, window (USD)


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
    return {pid: math.fsum(w) / len(w) for pid, w in windows(session, pipelines, window).items()}


def windows(
    session: Session, pipelines: Sequence[Costed], window: int
) -> dict[int, tuple[float, ...]]:
    """The retraining costs (USD, oldest first) of each pipeline's production variant's
    newest ``window`` runs, by pipeline id: what the bill draws from."""
    if not pipelines:
        return {}
    ids = None if len(pipelines) > ID_LIST_LIMIT else [p.id for p in pipelines]
    counters = rollup_reads.production_changes(session, ids)
    cache: dict[Key, Entry] = kept(session, "recent_costs")
    out: dict[int, tuple[float, ...]] = {}
    stale: dict[int, tuple[Key, Entry]] = {}
    for p in pipelines:
        found = counters.get(p.id)
        if found is None or found[0] != p.production_variant:
            continue  # no runs of the production variant (or changed since p was read)
        key = (p.id, p.production_variant, window)
        entry = cache.get(key)
        if entry is not None and entry[:2] == (found[1], p.price_per_gpu_hour):
            out[p.id] = entry[2]
        else:
            stale[p.id] = (key, (found[1], p.price_per_gpu_hour, ()))
    if stale:
        fresh = repo.recent_costs(session, {pid: k[1] for pid, (k, _) in stale.items()}, window)
        for pid, costs in fresh.items():
            key, (changes, price, _) = stale[pid]
            cache[key] = (changes, price, costs)
            out[pid] = costs
    return out
