"""KeptMap (app/db/kept.py), what a worker keeps between requests: the two ways a kept
value went wrong before (issue 36 item 10) are probed against the map itself and against
a real site, and the map's bound, counts, immutability and lock are checked."""

from __future__ import annotations

import threading
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from fastapi.testclient import TestClient

from app.analytics import costs
from app.db.engine import Database
from app.db.kept import KEPT, KeptMap
from app.pipelines.service import briefs
from app.planning.scenario import RUN_WINDOW
from app.runs.service import delete
from tests.fixtures.builders import make_run

PROBE: KeptMap[tuple[str, int], tuple[float]] = KeptMap("levers")  # any declared map


class Undone(Exception):
    """Raised inside a write to roll it back."""


def test_a_value_made_inside_a_write_that_rolls_back_is_never_served(db: Database) -> None:
    # $40.00 made in a write that then rolls back; the same key read afterwards must be
    # made again ($4,000.00), never the write's value.
    with pytest.raises(Undone), db.write() as s:
        assert PROBE.get(s, (("bill", 1), 7), lambda: (40.0,)) == (40.0,)
        assert PROBE.get(s, (("bill", 1), 7), lambda: (41.0,)) == (41.0,)  # nothing kept
        raise Undone
    with db.read() as s:
        assert PROBE.get(s, (("bill", 1), 7), lambda: (4000.0,)) == (4000.0,)
    with db.read_latest() as s:
        assert PROBE.get(s, (("bill", 1), 7), lambda: (0.0,)) == (4000.0,)  # kept by a read


def test_a_call_with_another_argument_never_gets_the_others_value(db: Database) -> None:
    with db.read() as s:
        assert PROBE.get(s, (("month", 20), 7), lambda: (1045.47,)) == (1045.47,)
        # Another argument (window 5 against 20), the same version: made, not served.
        assert PROBE.get(s, (("month", 5), 7), lambda: (400.0,)) == (400.0,)
        # The same argument, another version (a run moved the counter): made again.
        assert PROBE.get(s, (("month", 20), 8), lambda: (1.0,)) == (1.0,)
        assert PROBE.get(s, (("month", 5), 7), lambda: (0.0,)) == (400.0,)
        many = PROBE.get_many(
            s, [(("month", 5), 7), (("month", 20), 7)], lambda new: {k: (9.0,) for k in new}
        )
        assert many == {("month", 5): (400.0,), ("month", 20): (9.0,)}  # 20@7 was replaced


def _post(client: TestClient, headers: dict[str, str], run_id: str, day: int) -> int:
    start = datetime(2026, 11, day, 6, tzinfo=UTC)
    run = make_run(pipeline="km", run_id=run_id, started_at=start.isoformat(),
                   finished_at=(start + timedelta(hours=10)).isoformat())  # fmt: skip
    r = client.post("/api/v1/runs/batch", json={"runs": [run]}, headers=headers)
    assert r.status_code == 201, r.text
    pk: int = r.json()["runs"][0]["id"]
    return pk


def _km_with_runs(
    client: TestClient, admin: dict[str, str], ingest: dict[str, str], runs: int
) -> None:
    assert client.put("/api/v1/pipelines/km", json={}, headers=admin).is_success
    for i in range(runs):
        _post(client, ingest, f"km-{i}", day=i + 1)


def test_a_real_window_kept_inside_a_write_that_rolls_back_is_never_served(
    client: TestClient, db: Database, admin_headers: dict[str, str], ingest_headers: dict[str, str]
) -> None:
    # Three runs of one pipeline, then a write that deletes the newest (its variant's
    # change counter moves from N to N+1), reads the window of costs (two runs) and rolls
    # back. A commit then posts a fourth run: the counter is N+1 again, for four runs.
    # Had the write kept its two-run window under (N+1, price), the read would get it.
    assert client.put("/api/v1/pipelines/km", json={"runs_per_week": 2}, headers=admin_headers)
    pks = [_post(client, ingest_headers, f"km-{i}", day=i + 1) for i in range(3)]
    with db.read() as s:
        listed = briefs(s)
    with pytest.raises(Undone), db.write() as s:
        delete(s, pks[-1])
        assert len(costs.windows(s, listed, RUN_WINDOW)[listed[0].id]) == 2
        raise Undone
    _post(client, ingest_headers, "km-3", day=4)
    with db.read() as s:
        assert len(costs.windows(s, listed, RUN_WINDOW)[listed[0].id]) == 4


def test_a_real_window_read_with_another_length_is_never_the_others(
    client: TestClient, db: Database, admin_headers: dict[str, str], ingest_headers: dict[str, str]
) -> None:
    _km_with_runs(client, admin_headers, ingest_headers, 4)
    with db.read() as s:
        listed = briefs(s)
        pid = listed[0].id
        assert len(costs.windows(s, listed, 3)[pid]) == 3
        assert len(costs.windows(s, listed, 2)[pid]) == 2  # the window is in the key
        assert len(costs.windows(s, listed, 3)[pid]) == 3


def test_a_map_holds_its_bound_least_recently_used_first_out(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    slots = db.kept.slots("levers")
    monkeypatch.setattr(slots, "declared", replace(slots.declared, bound=2))
    with db.read() as s:
        for n in (1, 2):
            PROBE.get(s, (("p", n), 0), lambda n=n: (float(n),))  # type: ignore[misc]
        PROBE.get(s, (("p", 1), 0), lambda: (0.0,))  # a hit: 1 is now the most recent
        PROBE.get(s, (("p", 3), 0), lambda: (3.0,))  # 2 goes
        assert list(slots.values) == [("p", 1), ("p", 3)]
    # 4 gets: 3 misses (1, 2, 3), 1 hit, 1 eviction, 2 held.
    found = next(x for x in db.kept.stats() if x.name == "levers")
    assert (found.hits, found.misses, found.evictions, found.size) == (1, 3, 1, 2)


def test_a_mutable_value_is_refused(db: Database) -> None:
    loose: KeptMap[str, object] = KeptMap("levers")
    with db.read() as s, pytest.raises(TypeError, match="immutable"):
        loose.get(s, ("x", 0), lambda: {"v": 1})


def test_threads_share_a_map_without_losing_a_count(db: Database) -> None:
    # uvicorn runs sync endpoints in a thread pool: the map's lock keeps its dict and
    # counts whole under 8 threads of 500 gets each (a count lost: a race).
    store, name = db.kept, "levers"
    shared: KeptMap[int, tuple[int]] = KeptMap(name)
    slots = store.slots(name)

    def work(t: int) -> None:
        for i in range(500):
            shared._get(slots, ((t * 7 + i) % 50, 0), lambda i=i: (i,))  # type: ignore[misc]

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stats = slots.stats()
    assert stats.hits + stats.misses == 8 * 500
    assert stats.size == 50


def test_every_map_is_declared_with_a_bound_and_its_key() -> None:
    names = [d.name for d in KEPT]
    assert len(names) == len(set(names))
    assert all(d.bound >= 1 and d.key for d in KEPT)
    assert next(d for d in KEPT if d.name == "portfolio").bound == 4  # a whole answer
    with pytest.raises(KeyError):
        KeptMap("undeclared")


def test_the_maps_are_on_metrics(client: TestClient) -> None:
    text = client.get("/metrics").text
    assert 'cadence_kept_map_hits_total{map="recent_costs"}' in text
    assert 'cadence_kept_map_bound{map="portfolio"} 4.0' in text


def test_the_month_and_todays_bill_look_up_the_inputs_once_a_request(
    client: TestClient, db: Database, admin_headers: dict[str, str], ingest_headers: dict[str, str]
) -> None:
    # The portfolio asks for the month's inputs twice (the month to date, today's bill);
    # the second ask is answered by the request's memo, not by 5,000 more look-ups in
    # the kept map: one pipeline here, so one look-up a request, not two.
    _km_with_runs(client, admin_headers, ingest_headers, 3)

    def looked_up() -> int:
        found = next(x for x in db.kept.stats() if x.name == "month_inputs")
        return found.hits + found.misses

    assert client.get("/api/v1/portfolio").status_code == 200
    before = looked_up()
    assert client.get("/api/v1/portfolio").status_code == 200
    assert looked_up() - before == 1
