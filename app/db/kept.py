"""What a worker keeps between requests: :data:`KEPT`, the one list, and :class:`KeptMap`.

Org-wide pages need, for thousands of pipelines, values that take seconds to read from
millions of runs; a worker keeps them, each in a map declared below with its bound and
what its key holds. A map's key is ``(slot, version)``:

- the **slot** (hashable) names the thing: a pipeline id and every argument of the call
  that made the value (a window, a month, a token's list of pipelines);
- the **version** (compared with ``==``) is everything the value depends on besides:
  the change counters of the runs it was read from, the pipeline's settings.

A value is served only when both are equal to the ones asked for, so a call with another
argument never gets another call's value; a new version replaces the old in its slot, so
a map never holds more than ``bound`` values (least recently used first out).

Rules every map keeps (:class:`KeptMap` enforces the first two):

- **Kept only from read sessions.** ``Database.read()`` and ``read_latest()`` mark their
  sessions; a write session looks up (a value kept under an equal version is what making
  it again would give) but never stores: ``make`` runs and nothing is kept, so a value
  made inside a write that rolls back is never served after. A session made some other
  way sees nothing.
- **Locked.** uvicorn runs sync endpoints in a thread pool: each map has its own
  ``threading.Lock`` around its dict (never around ``make``, which may read for seconds;
  two threads making one value keep one of two equal values).
- **Immutable values.** Callers share what they get: frozen dataclasses and tuples. A
  dict, list or set is refused as a value; what a frozen value holds inside is not
  copied, so callers never change it (said where each value type is defined).

Per-request memos (``app.db.memo.per_session``, ``per_read_session``) are not here: they
live in one session's ``info`` and die with it. ``functools.lru_cache`` remains only on
pure functions of their arguments (the list in ``tests/system/test_architecture_kept.py``).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from sqlalchemy.orm import Session

STORE = "cadence_kept"  # the session.info key of the Database's KeptStore
KEEPS = "cadence_keeps"  # set by Database.read() and read_latest(): their sessions keep

S = TypeVar("S", bound=Hashable)
V = TypeVar("V")

# The bound of a per-pipeline map of the org-wide reads: four times the 5,000 pipelines
# docs/scaling.md measures (windows browsed, a token's list beside the whole). Beyond it
# values are made again, never wrong.
ORG = 20_000
PAGE = 256  # per-pipeline values only a pipeline's page or API reads: the pages browsed
WHOLE = 4  # whole org-wide answers: a few teams, token limits or weeks browsed
SHARED = True  # the map's values are kept by the database too (Declared.shared)


@dataclass(frozen=True)
class Declared:
    """One map: its name (the ``map`` label on /metrics), its bound, and what its key
    holds (slot; version)."""

    name: str
    bound: int
    key: str
    # Kept by the database too (``app.db.kept_snapshot``): every part of the version is
    # read from the database, nothing from this process (a stamp, a period of its clock).
    shared: bool = False


# The one list of what a worker keeps between requests, laid out as a table (one map a
# row: name, bound, key, shared), which ruff's one-argument-a-line layout would not keep.
KEPT: tuple[Declared, ...] = (
    Declared("recent_costs", ORG, "pipeline, production variant, window; variant's "
             "change counter, pipeline's price", SHARED),
    Declared("org_weeks", ORG, "pipeline, the window's first Monday; change count, "
             "production variant", SHARED),
    Declared("month_inputs", ORG, "pipeline, month, day, window; change count, production "
             "variant, price", SHARED),
    Declared("org_month_to_date", ORG, "pipeline, window; inputs' key, retrainings still "
             "to start, budget, thresholds, prior, the extras' clock", SHARED),
    Declared("bill_now", ORG, "pipeline, window; inputs' key, cadence, prior, day", SHARED),
    Declared("cost_models", ORG, "pipeline, window; cost series, declared changes, prior", SHARED),
    Declared("org_prior_parts", ORG, "a window's cost series; nothing (pure)", SHARED),
    Declared("org_prior", 1, "the organisation; every pipeline's id, production variant, "
             "price and change counter", SHARED),
    Declared("month_to_date", PAGE, "pipeline; everything it is computed from"),
    Declared("month_extras", PAGE, "pipeline; change count, production variant, day"),
    Declared("page_reads", PAGE, "pipeline, gate's variants; change count, settings, week, "
             "month"),
    Declared("levers", PAGE, "pipeline, scenario; change count, settings"),
    Declared("overview_cards", ORG, "pipeline; change count, settings", SHARED),
    Declared("org_plan_options", ORG, "pipeline; settings, costs window, curve stamp, "
             "change count", SHARED),
    # Each holds the pipeline's attempts (4.3 MB at 10,000 runs): 16, not 64, caps it.
    Declared("forecast_record", 16, "pipeline, month; change count, settings, thresholds"),
    Declared("org_forecast_stored", 2, "month; nothing (closed months do not change)"),
    Declared("org_forecast_scores", ORG, "pipeline, month; change count", SHARED),
    Declared("bill_months", 1_000, "month, pipeline asked for; runs' and bill's stamp"),
    Declared("portfolio", WHOLE, "day, token's pipelines, team; every input's key", SHARED),
    Declared("review", WHOLE, "month, week, token's pipelines, team; every input's key", SHARED),
    Declared("org_plan", WHOLE, "token's pipelines, team, budget, risk; options' keys", SHARED),
    Declared("alert_rules", 1, "the index; the 5-second period it was read in"),
)  # fmt: skip
DECLARED = {d.name: d for d in KEPT}
MUTABLE = (dict, list, set, bytearray)


@dataclass(frozen=True)
class Stats:
    name: str
    bound: int
    size: int
    hits: int
    misses: int
    evictions: int


class _Slots:
    """One map's values in one Database: slot -> (version, value), least recently used
    first, and its counts."""

    def __init__(self, declared: Declared) -> None:
        self.declared = declared
        self.lock = threading.Lock()
        self.values: OrderedDict[Hashable, tuple[object, Any]] = OrderedDict()
        self.hits = self.misses = self.evictions = 0

    def find(self, slot: Hashable, version: object) -> tuple[bool, Any]:
        found = self.find_many({slot: version})
        return (True, found[slot]) if found else (False, None)

    def find_many(self, wanted: Mapping[Any, object]) -> dict[Any, Any]:
        """The values kept under these slots at these versions, under one lock (a warm
        org-wide read looks up 5,000 at once)."""
        out = {}
        with self.lock:
            values = self.values
            for slot, version in wanted.items():
                found = values.get(slot)
                if found is not None and found[0] == version:
                    values.move_to_end(slot)
                    out[slot] = found[1]
            self.hits += len(out)
            self.misses += len(wanted) - len(out)
        return out

    def put(self, slot: Hashable, version: object, value: object) -> None:
        self.put_many({slot: (version, value)})

    def put_many(self, made: Mapping[Any, tuple[object, object]]) -> None:
        for _, value in made.values():
            if isinstance(value, MUTABLE):
                name = self.declared.name
                raise TypeError(f"kept map {name}: values are immutable, not {value!r:.40}")
        with self.lock:
            for slot, entry in made.items():
                self.values[slot] = entry
                self.values.move_to_end(slot)
            while len(self.values) > self.declared.bound:
                self.values.popitem(last=False)
                self.evictions += 1

    def stats(self) -> Stats:
        with self.lock:
            d = self.declared
            return Stats(d.name, d.bound, len(self.values), self.hits, self.misses, self.evictions)


class KeptStore:
    """Every map's values for one Database (tests and tools that open several never
    mix them); sessions carry it in their info."""

    def __init__(self) -> None:
        self._maps = {d.name: _Slots(d) for d in KEPT}

    def slots(self, name: str) -> _Slots:
        return self._maps[name]

    def stats(self) -> list[Stats]:
        return [m.stats() for m in self._maps.values()]

    def shared(self) -> dict[str, list[tuple[Hashable, object, Any]]]:
        """Each shared map's (slot, version, value), least recently used first: what
        ``app.db.kept_snapshot`` writes to the database."""
        out = {}
        for d in KEPT:
            if d.shared:
                m = self._maps[d.name]
                with m.lock:
                    out[d.name] = [(slot, v, value) for slot, (v, value) in m.values.items()]
        return out

    def restore(self, name: str, entries: Iterable[tuple[Hashable, object, Any]]) -> int:
        """Keep a shared map's values read back from the database (those this process
        kept already stay: they are as new or newer); how many were kept."""
        m = self._maps[name]
        if not m.declared.shared:
            raise ValueError(f"kept map {name} is not shared")
        with m.lock:
            fresh = [(slot, (v, value)) for slot, v, value in entries if slot not in m.values]
        m.put_many(dict(fresh))
        return len(fresh)

    def clear(self) -> None:
        """Forget every value (tests, and a tool that edited runs by hand)."""
        for m in self._maps.values():
            with m.lock:
                m.values.clear()


class KeptMap(Generic[S, V]):
    """A typed view of one map of :data:`KEPT`, declared where its values are made:
    ``COSTS: KeptMap[tuple[int, str, int], Series] = KeptMap("recent_costs")``."""

    def __init__(self, name: str) -> None:
        self.declared = DECLARED[name]  # a KeyError at import: add it to KEPT first

    def _slots(self, session: Session) -> tuple[_Slots | None, bool]:
        """The map's values for this session's database and whether the session may
        store: a read session keeps; a write session only looks up (a value kept under an
        equal version is what making it would give; one it made could be undone by its
        rollback); a session made some other way sees nothing."""
        store = session.info.get(STORE)
        if not isinstance(store, KeptStore):
            return None, False
        return store.slots(self.declared.name), bool(session.info.get(KEEPS))

    def get(self, session: Session, key: tuple[S, object], make: Callable[[], V]) -> V:
        """The value kept under ``key`` = (slot, version), else ``make()`` (kept there
        from a read session)."""
        slots, keeps = self._slots(session)
        if slots is None:
            return make()
        if keeps:
            return self._get(slots, key, make)
        hit, value = slots.find(*key)
        return value if hit else make()

    def get_from(self, store: KeptStore, key: tuple[S, object], make: Callable[[], V]) -> V:
        """:meth:`get` for a caller with no session: ``make`` reads in a read unit of work
        of its own (``Database.read``), so what it keeps cannot be a write's."""
        return self._get(store.slots(self.declared.name), key, make)

    def _get(self, slots: _Slots, key: tuple[S, object], make: Callable[[], V]) -> V:
        hit, value = slots.find(*key)
        if hit:
            found: V = value
            return found
        made = make()
        slots.put(key[0], key[1], made)
        return made

    def get_many(
        self,
        session: Session,
        keys: Iterable[tuple[S, object]],
        make_missing: Callable[[list[S]], Mapping[S, V]],
    ) -> dict[S, V]:
        """Each key's value by slot; those not kept made by one ``make_missing(slots)``
        (the org-wide readers' one statement for the pipelines that moved), which answers
        every slot it is given."""
        slots, keeps = self._slots(session)
        wanted = dict(keys)
        if slots is None:
            return dict(make_missing(list(wanted)))
        out = slots.find_many(wanted)
        missing = [slot for slot in wanted if slot not in out]
        if missing:
            made = make_missing(missing)
            if keeps:
                slots.put_many({slot: (wanted[slot], made[slot]) for slot in missing})
            out.update((slot, made[slot]) for slot in missing)
        return {slot: out[slot] for slot in wanted} if missing else out  # in the keys' order

    def put(self, session: Session, key: tuple[S, object], value: V) -> V:
        """Keep ``value`` under ``key`` (in a read session; else nothing is kept)."""
        slots, keeps = self._slots(session)
        if slots is not None and keeps:
            slots.put(key[0], key[1], value)
        return value

    def last(self, session: Session, slot: S) -> V | None:
        """The value last kept in ``slot`` whatever its version (for a value that is
        "the latest org-wide read's", such as the organisation's prior), or None."""
        slots, _ = self._slots(session)
        if slots is None:
            return None
        with slots.lock:
            found = slots.values.get(slot)
        return None if found is None else found[1]

    def forget(self, store: KeptStore) -> None:
        """Drop every value of this map (this process changed what it was read from)."""
        slots = store.slots(self.declared.name)
        with slots.lock:
            slots.values.clear()
