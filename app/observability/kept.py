"""The kept maps' counts on /metrics (``app/db/kept.py``), per map:

- ``cadence_kept_map_hits_total{map}``, ``cadence_kept_map_misses_total{map}``: values
  served from the map, and values made (read again) because none was kept for the key;
- ``cadence_kept_map_evictions_total{map}``: values dropped to keep the map in its bound;
- ``cadence_kept_map_size{map}``, ``cadence_kept_map_bound{map}``: values held now, and
  the most it holds.

They are the answering process's own: with several workers (``PROMETHEUS_MULTIPROC_DIR``)
a scrape sees the worker that answered it, since each keeps its own maps.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from app.db.kept import KeptStore

if TYPE_CHECKING:
    from fastapi import FastAPI


class KeptCollector(Collector):
    def __init__(self, app: FastAPI) -> None:
        self.app = app

    def describe(self) -> Iterable[Metric]:
        return []  # computed at scrape time only

    def collect(self) -> Iterator[Metric]:
        db = getattr(self.app.state, "database", None)
        store = getattr(db, "kept", None)
        if not isinstance(store, KeptStore):
            return
        label = ("map",)
        hits = CounterMetricFamily(
            "cadence_kept_map_hits", "Values served from a kept map.", labels=label
        )
        misses = CounterMetricFamily(
            "cadence_kept_map_misses",
            "Values made because the kept map held none for the key.",
            labels=label,
        )
        evictions = CounterMetricFamily(
            "cadence_kept_map_evictions",
            "Values dropped to keep a kept map within its bound.",
            labels=label,
        )
        size = GaugeMetricFamily("cadence_kept_map_size", "Values a kept map holds.", labels=label)
        bound = GaugeMetricFamily(
            "cadence_kept_map_bound", "The most values a kept map holds.", labels=label
        )
        for s in store.stats():
            hits.add_metric([s.name], s.hits)
            misses.add_metric([s.name], s.misses)
            evictions.add_metric([s.name], s.evictions)
            size.add_metric([s.name], s.size)
            bound.add_metric([s.name], s.bound)
        yield from (hits, misses, evictions, size, bound)
