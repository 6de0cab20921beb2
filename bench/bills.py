"""Bill phase: the overview's p95 with a 30,000-line FOCUS bill beside the same overview
without one (issue 36: within 20%), and the import's time.

A fresh database (``cadence_bench_bill``): 8 pipelines whose 400 runs of last month hold
42 instances (``cloud_resource_id``), then the overview and a billed pipeline's page are
timed; ``cadence import focus`` stores hourly lines of last month for those instances
(42 x 720 hours cut at 30,000), and the same pages are timed again. The reconciliation
reads the totals kept at import, so the bill should cost the overview next to nothing.
"""

from __future__ import annotations

import csv
import math
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from bench.analytics import measure_endpoint
from bench.config import REPO, Config
from bench.ingest import failure
from bench.procs import say
from bench.server import (
    Server,
    cadence_env,
    create_database,
    create_token,
    migrate,
    run_cadence,
    sqlalchemy_url,
)

WORK = REPO / "var" / "bench-bill"
DATABASE = "cadence_bench_bill"
PIPELINES, RUNS = 8, 400
HEADER = ("BilledCost", "BillingAccountId", "BillingCurrency", "ChargeCategory",
          "ChargeDescription", "ChargePeriodEnd", "ChargePeriodStart", "ConsumedQuantity",
          "ConsumedUnit", "EffectiveCost", "InvoiceId", "ListCost", "ProviderName",
          "ResourceId", "SkuId", "SubAccountId", "Tags")  # fmt: skip
RATIO_TARGET = 1.2  # the overview's p95 with the bill, over without


def last_month(now: datetime | None = None) -> datetime:
    first = (now or datetime.now(UTC)).replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    return (first - timedelta(days=1)).replace(day=1)


def instance(i: int) -> str:
    return f"arn:aws:ec2:us-east-1:111122223333:instance/i-bench{i:04d}"


def bill_file(path: Path, lines: int, start: datetime) -> int:
    """``lines`` hourly p4d lines from ``start``, across as many instances as a month of
    hours needs (42 for 30,000 in a 30-day month); returns the instance count."""
    following = (start + timedelta(days=32)).replace(day=1)
    hours = int((following - start).total_seconds() // 3600)
    instances = math.ceil(lines / hours)
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(HEADER)
        for n in range(lines):
            at = start + timedelta(hours=n // instances)
            writer.writerow(["32.77", "999988887777", "USD", "Usage",
                             "On Demand Linux p4d.24xlarge Instance Hour",
                             (at + timedelta(hours=1)).isoformat(), at.isoformat(), "1", "Hrs",
                             "24.58", "inv-1", "32.77", "AWS", instance(n % instances),
                             "8ZP5JJ2ZAJX5H4YS", "111122223333", "{}"])  # fmt: skip
    return instances


def runs(start: datetime, instances: int) -> list[dict[str, Any]]:
    """RUNS runs of 10 h across the month, each holding one instance."""
    step = timedelta(hours=(27 * 24) / RUNS)
    return [
        {"pipeline": f"bill-{i % PIPELINES}", "run_id": f"r{i}", "workers": 8,
         "started_at": (start + i * step).isoformat(),
         "finished_at": (start + i * step + timedelta(hours=10)).isoformat(),
         "gpu_utilization": 0.5, "tags": {"cloud_resource_id": instance(i % instances)}}
        for i in range(RUNS)
    ]  # fmt: skip


def run_bill(cfg: Config, out: list[dict[str, Any]]) -> None:
    lines = 3_000 if cfg.quick else 30_000
    say(f"\n== bill: the overview with a {lines:,}-line FOCUS bill and without ==")
    try:
        WORK.mkdir(parents=True, exist_ok=True)
        create_database(cfg.pg, DATABASE, drop_first=True)
        url = sqlalchemy_url(cfg.pg, DATABASE)
        env = cadence_env(url, 8000, 1)
        migrate(env)
        token = create_token(env, "ingest")
        start = last_month()
        instances = bill_file(WORK / "focus.csv", lines, start)
        with Server(url, cfg.workers, "bill") as srv:
            headers = {"Authorization": f"Bearer {token}"}
            for i in range(0, RUNS, 100):
                batch = {"runs": runs(start, instances)[i : i + 100]}
                httpx.post(f"{srv.url}/api/v1/runs/batch", json=batch, headers=headers,
                           timeout=60).raise_for_status()  # fmt: skip
            _pages(cfg, srv, out, "without a bill")
            t0 = time.perf_counter()
            said = run_cadence(["import", "focus", str(WORK / "focus.csv")], env, timeout=900)
            seconds = time.perf_counter() - t0
            say(f"  import focus, {lines:,} lines: {seconds:.1f} s; {said.strip()[:160]}")
            out.append({"group": "bill", "name": f"import focus, {lines:,} lines",
                        "seconds": round(seconds, 2), "said": said.strip()[:300]})  # fmt: skip
            _pages(cfg, srv, out, f"with a {lines:,}-line bill")
        out.append(_ratio(out, lines))
    except Exception as exc:
        out.append(failure("bill", "postgresql", "bill", 0, exc))
        say(f"  bill FAILED: {out[-1]['error']}")


def _pages(cfg: Config, srv: Server, out: list[dict[str, Any]], label: str) -> None:
    for page, url in (("overview", "/"), ("billed pipeline page", "/pipelines/bill-0")):
        measure_endpoint(cfg, srv, out, DATABASE, "bill", f"{page}, {label}", url, 500.0)


def _ratio(out: list[dict[str, Any]], lines: int) -> dict[str, Any]:
    """The overview's p95 with the bill over without (target: at most RATIO_TARGET)."""
    p95 = {r["name"]: r.get("latency_ms", {}).get("p95") for r in out if r.get("group") == "bill"}
    without, billed = (
        p95.get("overview, without a bill"),
        p95.get(f"overview, with a {lines:,}-line bill"),
    )
    if not without or not billed:
        return {"group": "bill", "name": "overview p95 ratio", "error": "a timing is missing"}
    ratio = billed / without
    say(f"  overview p95 {billed:.1f} ms with the bill, {without:.1f} ms without: x{ratio:.2f}")
    return {"group": "bill", "name": "overview p95 with the bill / without",
            "ratio": round(ratio, 3), "target": f"<= {RATIO_TARGET}",
            "status": "PASS" if ratio <= RATIO_TARGET else "MISS"}  # fmt: skip
