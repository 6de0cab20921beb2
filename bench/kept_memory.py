"""What one worker keeps between requests at the org bench's size (issue 38): run
``python -m bench.kept_memory`` after ``python -m bench --phases org`` built its database.

In one process, traced by ``tracemalloc``: the warm start (``app.portfolio.warm``: the
portfolio and the weekly review of every pipeline), then the big pipeline's page, then
each kept map of ``app.db.kept.KEPT`` cleared in turn, largest first. What clearing a
map frees is its share; a value two maps hold is counted where it is freed last (the
month to date of every pipeline is inside the whole portfolio and review). Values per
map times its bound is the most that map can hold at this size.
"""

from __future__ import annotations

import gc
import sys
import tracemalloc

from fastapi.testclient import TestClient
from sqlalchemy import create_engine

from bench import dataset, org
from bench.config import Config
from bench.server import sqlalchemy_url


def main() -> int:
    from app.db.engine import Database
    from app.main import create_app
    from app.portfolio.warm import warm
    from app.settings import Settings

    cfg = Config()
    url = sqlalchemy_url(cfg.pg, org.database(cfg))
    db = Database(create_engine(url))
    app = create_app(Settings(database_url=url, warm_start=False, alert_sender=False), db)
    with TestClient(app) as client:
        client.get("/healthz")  # imports and connections before the trace starts
        gc.collect()
        tracemalloc.start()
        base = tracemalloc.get_traced_memory()[0]
        took = warm(db)
        assert client.get(f"/pipelines/{dataset.BIG}").status_code == 200
        gc.collect()
        kept, peak = (m - base for m in tracemalloc.get_traced_memory())
        mb = f"kept {kept / 1e6:.1f} MB, peak {peak / 1e6:.1f} MB"
        print(f"warm start {took:.1f} s (traced); {mb}")
        rows = []
        for stats in sorted(db.kept.stats(), key=lambda s: -s.size):
            before = tracemalloc.get_traced_memory()[0]
            slots = db.kept.slots(stats.name)
            with slots.lock:
                slots.values.clear()
            gc.collect()
            freed = (before - tracemalloc.get_traced_memory()[0]) / 1e6
            rows.append((stats.name, stats.size, stats.bound, freed))
        print(f"{'map':22s} {'values':>7s} {'bound':>7s} {'MB':>7s} {'MB at bound':>12s}")
        for name, size, bound, freed in sorted(rows, key=lambda r: -r[3]):
            if size:
                print(f"{name:22s} {size:7d} {bound:7d} {freed:7.1f} {freed / size * bound:12.1f}")
        left = (tracemalloc.get_traced_memory()[0] - base) / 1e6
        print(f"left when every map is cleared: {left:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
