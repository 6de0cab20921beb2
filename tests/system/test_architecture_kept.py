"""What a worker keeps between requests is kept in one place: ``app/db/kept.py``'s
KeptMap, whose list KEPT is the one list of it (ARCHITECTURE.md, "Where a change goes").
The checker (tests/fixtures/kept_check.py) reads every module of app/ and finds state
kept by hand; what it finds must be on the allow-lists below, each with its reason, and
it refuses a probe of each shape it looks for."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from app.db.kept import KEPT
from tests.fixtures.architecture import modules, name_of
from tests.fixtures.kept_check import field_memos, kept_by_hand

# Found by the checker, allowed, each with why (``module what``, without the line).
ALLOWED = {
    "app.db.kept _Slots.values": "KeptMap's own dict",
    "app.db.memo session.info mutated": "per-request memos: one session's info, which dies "
    "with it (per_session, per_read_session)",
    "app.auth.service TokenCache._items": "credentials per application (two apps on one "
    "database are two workers), checked on the event loop around an await; expires after "
    "CADENCE_TOKEN_CACHE_SECONDS, bound 10,000, its own lock",
    "app.security.throttle Throttle._events": "the sign-in and test-send rate limits' own "
    "state (events, not values read), bounded, locked",
    "app.observability.metrics Telemetry._series": "prometheus_client's label handles, one "
    "per (method, route template, status): bounded by the routes",
    "app.settings @lru_cache get_settings": "no arguments: the environment read once",
    "app.db.revision @lru_cache head_revision": "no arguments: the migrations' head, a constant",
    "app.db.rollup @cache _adding": "per dialect (two): statements built once",
    "app.assets @cache asset": "per static file name, files that ship with the app",
    "app.billing.reader @lru_cache _gpus": "pure: GPUs of an instance type name, bound 4,096",
    "app.planning.bill @lru_cache spread_factor": "pure function of its arguments, bound 4,096",
    "app.planning.scaling @lru_cache _fit_medians": "pure function of its arguments, bound 512",
    "app.planning.sequential @lru_cache critical_values": "pure function of its arguments, "
    "bound 64",
    "app.planning.change_points @lru_cache _scan_of": "pure: a series' split scan by its "
    "bytes, read-only arrays, bound 256",
    "app.planning.change_points @lru_cache _pairs": "pure: index pairs of n, read-only, bound 64",
}
# Dataclass fields filled after the value is made.
FIELDS_ALLOWED = {
    "app.analytics.org_weeks PipelineWeeks.summaries": "a memo of a pure function of the "
    "frozen sums (two threads write equal values)",
    "app.analytics.record PipelineRecord.scored": "the same: each month scored from the "
    "frozen fields",
    "app.portfolio.service Portfolio.orders": "the same: the rows sorted once per order",
    "app.review.service ReviewData.made": "the same: the export's rows and CSV of the lines",
    "app.billing.reader BillFile.spans": "filled while one import reads its file, never kept",
    "app.planning.imports PipelineTotals.retrainings": "filled while totals are counted",
    "app.planning.reconcile Reconciliation.pipelines": "filled while it is built, not after",
    "app.sources.sacct Attempt.failed_steps": "filled while one sacct file is read",
}


def _unlined(found: list[str]) -> set[str]:
    return {re.sub(r":\d+ ", " ", f) for f in found}


def test_nothing_is_kept_between_requests_outside_kept_map() -> None:
    found = _unlined([f for p in modules() for f in kept_by_hand(p, name_of(p))])
    assert found - set(ALLOWED) == set(), (
        "a value kept between requests goes in a KeptMap (app/db/kept.py), declared in KEPT"
    )
    assert set(ALLOWED) - found == set(), "an allowed entry no longer exists: remove it"
    fields = _unlined(field_memos([(p, name_of(p)) for p in modules()]))
    assert fields == set(FIELDS_ALLOWED)


def _probe(tmp_path: Path, source: str) -> list[str]:
    path = tmp_path / "probe.py"
    path.write_text(source)
    return kept_by_hand(path, "app.probe")


REFUSED = """
import functools
from collections import OrderedDict

_recent = OrderedDict()
_seen: dict[int, float] = {}


def costs(session, pipeline_id):
    found = _seen.get(pipeline_id)
    if found is None:
        found = _seen[pipeline_id] = 1.0
    _recent.move_to_end(pipeline_id)
    memo = session.info.setdefault("mine", {})
    session.info["again"] = memo
    return db.caches["costs"]


class Holder:
    def __init__(self):
        self._items = {}

    def put(self, k, v):
        self._items[k] = v


@functools.lru_cache
def read(name):
    return name
"""

ACCEPTED = """
LIMITS = {"a": 1}  # a constant: read, never changed
from app.db.kept import KeptMap

KEPT_COSTS = KeptMap("recent_costs")


def costs(session, pipeline_id, make):
    local = {}
    local[pipeline_id] = 1
    return KEPT_COSTS.get(session, (pipeline_id, LIMITS["a"]), make)
"""


def test_the_checker_refuses_each_shape_and_accepts_a_kept_map(tmp_path: Path) -> None:
    assert _unlined(_probe(tmp_path, REFUSED)) == {
        "app.probe module-level _recent",
        "app.probe module-level _seen",
        "app.probe session.info mutated",
        "app.probe .caches",
        "app.probe Holder._items",
        "app.probe @lru_cache read",
    }
    assert len([f for f in _probe(tmp_path, REFUSED) if "session.info" in f]) == 2
    assert _probe(tmp_path, ACCEPTED) == []


def test_every_declared_map_is_used_once_and_every_map_is_declared() -> None:
    used: list[str] = []
    for path in modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "KeptMap":
                arg = node.args[0]
                assert isinstance(arg, ast.Constant), f"{name_of(path)}: name a map literally"
                used.append(arg.value)
    assert sorted(used) == sorted(d.name for d in KEPT)
