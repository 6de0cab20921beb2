"""What the workers keep, kept by the database too (app/db/kept_snapshot.py, issue 38's
warm start): a new worker reads another's values in one statement and serves the same
answer without making them; a value is still served only at its version; another code's
row is not read; a row that would build anything but a kept value is refused."""

from __future__ import annotations

import dataclasses
import logging
import os
import pickle
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from app.analytics import record
from app.analytics.month import month_of
from app.db import kept_snapshot
from app.db.engine import Database
from app.db.kept import KEPT
from app.db.models import Run
from app.db.models_kept import KeptSnapshot
from app.demo import load_demo, week_start
from app.demo_portfolio import load_portfolio_demo
from app.main import create_app
from app.portfolio.service import load_portfolio
from app.portfolio.warm import Warmer, warm
from app.runs.service import delete
from app.settings import Settings
from tests.fixtures.serving import statements

URL = "/api/v1/portfolio?sort=spend"
SHARED = {d.name for d in KEPT if d.shared}


@pytest.fixture
def demo_db(committed_db: Database) -> Database:
    with committed_db.write() as s:
        load_demo(s)
    return committed_db


def worker(db: Database) -> Database:
    """Another worker on the same database: its own, empty, kept maps."""
    return Database(db.engine)


def portfolio(db: Database) -> object:
    with db.read() as s:
        return load_portfolio(s, None, None, datetime.now(UTC).date())


def misses(db: Database) -> dict[str, int]:
    return {s.name: s.misses for s in db.kept.stats() if s.misses}


ORG_READS = ("/", "/review", URL, "/api/v1/portfolio/plan?budget=20000&risk=0.1")


def test_every_shared_value_is_read_back_as_written(demo_db: Database, settings: Settings) -> None:
    now = datetime.now(UTC)
    with demo_db.write() as s:
        load_portfolio_demo(s, week_start(now), now)
    last_month = record.closed_months(month_of(now), 1)[0]  # its forecasts stored: scored
    stored_at = datetime(last_month.year, last_month.month, 1, tzinfo=UTC) + timedelta(minutes=5)
    assert record.record_months(demo_db, now=stored_at) > 0
    with TestClient(create_app(settings, database=demo_db)) as client:
        for path in ORG_READS:
            assert client.get(path).status_code == 200, path
    before = demo_db.kept.shared()
    assert {name for name, values in before.items() if values} == SHARED  # every map tried
    assert kept_snapshot.save(demo_db) == sum(len(v) for v in before.values())
    new = worker(demo_db)
    loaded = kept_snapshot.load(new)
    assert loaded is not None and loaded.values == sum(len(v) for v in before.values())
    assert same(new.kept.shared(), before)  # slots, versions and values, in the same order


def same(a: object, b: object) -> bool:
    """``a == b`` where numpy arrays inside compare element by element."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and np.array_equal(a, b)
    if type(a) is not type(b):
        return False
    if dataclasses.is_dataclass(a):
        fields = [f.name for f in dataclasses.fields(a) if f.compare]  # memos: not written
        return all(same(getattr(a, f), getattr(b, f)) for f in fields)
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)  # type: ignore[index]
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(map(same, a, b))  # type: ignore[arg-type]
    return a == b


def test_a_new_worker_serves_what_another_made_without_making_it(demo_db: Database) -> None:
    warm(demo_db)
    written = kept_snapshot.save(demo_db)
    new = worker(demo_db)
    loaded = kept_snapshot.load(new)
    assert loaded is not None and loaded.values == written > 0
    assert portfolio(new) == portfolio(demo_db)
    # Every value the portfolio needed was found: the whole answer at once, so none of
    # the per-pipeline maps was even asked (a cold worker misses every one).
    assert misses(new) == {}
    cold = worker(demo_db)
    portfolio(cold)
    assert misses(cold)["portfolio"] == 1 and misses(cold)["org_weeks"] > 0


def test_the_first_request_of_a_started_worker_reads_as_a_warm_one(
    demo_db: Database, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The warm thread not started: its statements would be counted with the request's
    # (it is tested in tests/portfolio/test_warm.py).
    monkeypatch.setattr(Warmer, "start", lambda self: None)
    warm(demo_db)
    kept_snapshot.save(demo_db)
    with TestClient(create_app(settings, database=demo_db)) as client:
        warmed = statements(demo_db.engine, client, URL)  # the values are kept here
        answer = client.get(URL).json()
    new = worker(demo_db)
    on = settings.model_copy(update={"warm_start": True, "kept_snapshot_minutes": 60})
    with TestClient(create_app(on, database=new)) as client:
        assert client.app.state.kept_loaded.values > 0  # type: ignore[attr-defined]
        first = statements(new.engine, client, URL)
        assert client.get(URL).json() == answer
    # Read before serving: the first request reads what any warm one reads (the
    # pipelines and their counters), not the weeks, windows and months a cold one does.
    assert len(first) == len(warmed), "\n".join(first)


def test_a_value_whose_pipeline_moved_is_made_again(demo_db: Database) -> None:
    warm(demo_db)
    kept_snapshot.save(demo_db)
    with demo_db.write() as s:  # one run of one pipeline deleted: its counter moves
        delete(s, s.scalars(select(Run.id).order_by(Run.id.desc()).limit(1)).one())
    new, fresh = worker(demo_db), worker(demo_db)  # fresh: nothing kept, all made
    assert kept_snapshot.load(new) is not None
    assert portfolio(new) == portfolio(fresh)
    assert misses(new)["portfolio"] == 1  # the whole answer's version moved
    # The moved pipeline's weeks are read again; the other pipelines' are served.
    assert misses(new)["org_weeks"] == 1 < misses(fresh)["org_weeks"]


def test_another_codes_row_is_not_read(demo_db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    warm(demo_db)
    kept_snapshot.save(demo_db)
    monkeypatch.setattr(kept_snapshot, "CODE", "0" * 64)  # the next deploy's code
    new = worker(demo_db)
    assert kept_snapshot.load(new) is None
    assert all(s.size == 0 for s in new.kept.stats())


class Runs:
    """A value whose unpickling would run a command."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, (f"touch {self.marker}",))


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param(lambda m: {"org_prior": [(1, 1, Runs(m))]}, id="os.system"),
        pytest.param(lambda m: {"org_prior": [(1, 1, eval)]}, id="builtins.eval"),
        # A type of Cadence's that is no value: building one opens an engine.
        pytest.param(lambda m: {"org_prior": [(1, 1, Database)]}, id="not-a-value-type"),
    ],
)
def test_a_row_that_would_build_anything_but_kept_values_is_refused(
    committed_db: Database, tmp_path: Path, payload: object, caplog: pytest.LogCaptureFixture
) -> None:
    marker = tmp_path / "ran"
    data = pickle.dumps(payload(marker))  # type: ignore[operator]
    with pytest.raises(kept_snapshot.Refused):
        kept_snapshot.loads(data)
    with committed_db.write() as s:
        s.add(KeptSnapshot(code=kept_snapshot.CODE, written_at=datetime.now(UTC), entries=1,
                           payload=data))  # fmt: skip
    with caplog.at_level(logging.WARNING, logger="cadence.kept"):
        assert kept_snapshot.load(worker(committed_db)) is None
    assert "starting cold" in caplog.text and "is not a kept value's type" in caplog.text
    assert not marker.exists()


@dataclasses.dataclass
class Foreign:
    """Another library's dataclass, imported by an app module."""


def test_a_type_an_app_module_imported_from_elsewhere_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(kept_snapshot, "Foreign", Foreign, raising=False)
    module, name = b"app.db.kept_snapshot", b"Foreign"
    # A pickle (protocol 4) of the global app.db.kept_snapshot.Foreign, written by hand:
    # pickle.dumps would name the class by its own module.
    data = (
        b"\x80\x04\x8c" + bytes([len(module)]) + module + b"\x94\x8c" + bytes([len(name)]) + name
        + b"\x94\x93\x94."
    )  # fmt: skip
    with pytest.raises(kept_snapshot.Refused, match="Foreign is not a kept value's type"):
        kept_snapshot.loads(data)
    assert pickle.loads(data) is Foreign  # the bytes are sound: only the check refuses them


def test_a_value_made_in_a_write_that_rolled_back_is_never_written(demo_db: Database) -> None:
    with pytest.raises(RuntimeError), demo_db.write() as s:
        load_portfolio(s, None, None, datetime.now(UTC).date())  # made, not kept
        raise RuntimeError("rolled back")
    assert kept_snapshot.dumps(demo_db.kept)[1] == 0


def test_the_shared_maps_keep_no_value_of_this_process_only() -> None:
    # A map whose version holds a stamp or a period of this process's clock would be
    # served by another worker under an equal stamp that means something else there.
    assert {"recent_costs", "org_weeks", "month_inputs", "cost_models", "portfolio"} <= SHARED
    assert SHARED.isdisjoint({"bill_months", "alert_rules"})


def test_a_worker_that_started_from_the_database_writes_only_after_a_period(
    demo_db: Database,
) -> None:
    warmer = Warmer(demo_db, snapshot_minutes=60, loaded=True)
    warmer.start()
    deadline = time.monotonic() + 120
    while warmer.seconds is None and time.monotonic() < deadline:
        time.sleep(0.05)
    warmer.stop()
    assert warmer.seconds is not None and warmer.written == 0  # its values are the row's
    with demo_db.read() as s:
        assert s.scalar(select(func.count()).select_from(KeptSnapshot)) == 0
