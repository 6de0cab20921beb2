"""Concurrent retries must leave exactly one row per run (real commits, real connections)."""

from __future__ import annotations

import asyncio

import httpx
from sqlalchemy import func, select

from app.db.engine import Database
from app.db.models import Pipeline, Run
from app.main import create_app
from app.settings import Settings
from tests.fixtures.builders import make_run, make_token


async def _race(
    app: object, headers: dict[str, str], payloads: list[dict[str, object]], copies: int
) -> list[int]:
    transport = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        tasks = [
            client.post("/api/v1/runs", json=p, headers=headers)
            for p in payloads
            for _ in range(copies)
        ]
        responses = await asyncio.gather(*tasks)
    return [r.status_code for r in responses]


def test_identical_posts_racing_store_one_row(committed_db: Database, settings: Settings) -> None:
    headers = {"Authorization": f"Bearer {make_token(committed_db, 'ingest')}"}
    app = create_app(settings, database=committed_db)
    # 40 distinct runs over 3 new pipelines, each posted 4 times at once.
    payloads = [make_run(run_id=f"race-{i}", pipeline=f"pipe-{i % 3}") for i in range(40)]
    statuses = asyncio.run(_race(app, headers, payloads, copies=4))
    assert all(s in (200, 201) for s in statuses), statuses
    assert statuses.count(201) == 40
    with committed_db.read() as s:
        assert s.scalar(select(func.count()).select_from(Run)) == 40
        assert s.scalar(select(func.count()).select_from(Pipeline)) == 3


def test_conflicting_posts_racing_one_wins(committed_db: Database, settings: Settings) -> None:
    headers = {"Authorization": f"Bearer {make_token(committed_db, 'ingest')}"}
    app = create_app(settings, database=committed_db)
    payloads = [make_run(run_id="same", workers=w) for w in (1, 2, 4, 8)]
    statuses = asyncio.run(_race(app, headers, payloads, copies=2))
    assert statuses.count(201) == 1
    assert set(statuses) <= {200, 201, 409}
    with committed_db.read() as s:
        assert s.scalar(select(func.count()).select_from(Run)) == 1


def test_overlapping_batches_racing(committed_db: Database, settings: Settings) -> None:
    """Large batches (the bulk path) that overlap, sent at once: one row per run."""
    headers = {"Authorization": f"Bearer {make_token(committed_db, 'ingest')}"}
    app = create_app(settings, database=committed_db)
    all_runs = [make_run(run_id=f"bulk-{i:03d}", pipeline=f"pipe-{i % 2}") for i in range(60)]
    batches = [all_runs[0:40], all_runs[20:60], list(reversed(all_runs[10:50])), all_runs]

    async def race() -> list[int]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            responses = await asyncio.gather(
                *[
                    client.post("/api/v1/runs/batch", json={"runs": b}, headers=headers)
                    for b in batches
                    for _ in range(2)
                ]
            )
        return [r.status_code for r in responses]

    statuses = asyncio.run(race())
    assert set(statuses) <= {200, 201}, statuses
    with committed_db.read() as s:
        assert s.scalar(select(func.count()).select_from(Run)) == 60


def test_many_clients_each_run_twice_some_raced(committed_db: Database, settings: Settings) -> None:
    """16 clients post 2,400 runs; each run is sent twice (a retry after the answer), and
    every tenth is also raced by a second copy at the same moment. Exactly one row per
    run, and never a 5xx."""
    headers = {"Authorization": f"Bearer {make_token(committed_db, 'ingest')}"}
    app = create_app(settings, database=committed_db)
    clients, per_client = 16, 150

    async def main() -> list[int]:
        transport = httpx.ASGITransport(app=app)
        statuses: list[int] = []
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:

            async def worker(w: int) -> None:
                for i in range(per_client):
                    run = make_run(
                        run_id=f"c{w}-r{i}",
                        pipeline=f"pipe-{w % 4}",
                        interruptions=[] if i % 3 else make_run()["interruptions"],
                    )
                    copies = 2 if i % 10 == 0 else 1
                    first = await asyncio.gather(
                        *[
                            client.post("/api/v1/runs", json=run, headers=headers)
                            for _ in range(copies)
                        ]
                    )
                    retry = await client.post("/api/v1/runs", json=run, headers=headers)
                    statuses.extend([*(r.status_code for r in first), retry.status_code])

            await asyncio.gather(*[worker(w) for w in range(clients)])
        return statuses

    statuses = asyncio.run(main())
    assert not [s for s in statuses if s >= 500]
    assert set(statuses) <= {200, 201}
    assert statuses.count(201) == clients * per_client
    with committed_db.read() as s:
        assert s.scalar(select(func.count()).select_from(Run)) == clients * per_client
        assert s.scalar(select(func.count(func.distinct(Run.run_id))).select_from(Run)) == (
            clients * per_client
        )
