"""`python -m bench [--quick] [--phases ...] [--workers N] [--repeat N] [--backends ...]`."""

from __future__ import annotations

import argparse
import time
import traceback
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import dataset, procs, report, server
from bench.analytics import run_analytics
from bench.bills import run_bill
from bench.client import run_client
from bench.config import BACKENDS, DEFAULT_PHASES, PHASES, Config, quick_sizes
from bench.ingest import run_ingest
from bench.loadgen import ensure_wrk
from bench.org import run_org
from bench.server import REPO, BenchError, pg_version
from bench.sources import run_sources


def _choices(allowed: Sequence[str]) -> Any:
    def parse(text: str) -> tuple[str, ...]:
        items = tuple(dict.fromkeys(x.strip() for x in text.split(",") if x.strip()))
        bad = [x for x in items if x not in allowed]
        if bad or not items:
            raise argparse.ArgumentTypeError(f"choose from {', '.join(allowed)}; got {text!r}")
        return items

    return parse


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    p.add_argument(
        "--quick",
        action="store_true",
        help="smoke run (< 2 min): small counts, 1 repeat, 100k-run analytics DB "
        "unless the 1M one is already built",
    )
    p.add_argument(
        "--phases",
        type=_choices(PHASES),
        default=DEFAULT_PHASES,
        help="comma-separated: ingest,baseline,analytics,org,client,sources,bill "
        "(default: all but org)",
    )
    p.add_argument("--workers", type=int, default=2, help="uvicorn workers (default 2)")
    p.add_argument(
        "--repeat",
        type=int,
        default=None,
        help="repeats of the ingestion pairs; medians reported (default 3)",
    )
    p.add_argument(
        "--backends",
        type=_choices(BACKENDS),
        default=BACKENDS,
        help="postgresql,sqlite (default both; SQLite: ingestion only, once)",
    )
    p.add_argument("--rebuild", action="store_true", help="rebuild the analytics database")
    p.add_argument(
        "--batch-concurrency",
        type=int,
        default=2,
        help="concurrent batch POSTs, and connections of the bulk baselines (2)",
    )
    p.add_argument(
        "--pg",
        default=Config.pg,
        help="PostgreSQL server URL without a database (default %(default)s)",
    )
    p.add_argument(
        "--org-runs",
        type=int,
        default=Config.org_runs,
        help="org phase: runs over 5,000 pipelines (default %(default)s)",
    )
    p.add_argument(
        "--before",
        type=Path,
        default=None,
        help="org phase: also time this checkout's code (e.g. a worktree of main)",
    )
    p.add_argument(
        "--code",
        type=Path,
        default=None,
        help="run ingestion and analytics against this checkout's code instead",
    )
    p.add_argument(
        "--cold-starts",
        type=int,
        default=Config.cold_starts,
        help="org phase: fresh starts whose first portfolio read is timed (0: none)",
    )
    p.add_argument("--results", type=Path, default=Config.results_dir, help="output folder")
    return p


def config(args: argparse.Namespace) -> Config:
    cfg = Config(
        quick=args.quick,
        phases=args.phases,
        workers=max(1, args.workers),
        backends=args.backends,
        rebuild=args.rebuild,
        pg=args.pg,
        batch_concurrency=max(1, args.batch_concurrency),
        results_dir=args.results,
        org_runs=max(10_200, args.org_runs),
        before=args.before.resolve() if args.before else None,
    )
    if args.code is not None:
        server.CODE[0] = args.code.resolve()
        cfg.notes.append(f"code under test: {server.CODE[0]}")
    if args.quick:
        quick_sizes(cfg)
    if not args.quick or args.cold_starts != Config.cold_starts:
        cfg.cold_starts = max(0, args.cold_starts)
    if args.repeat is not None:
        cfg.repeat = max(1, args.repeat)
    return cfg


def _quick_dataset(cfg: Config) -> None:
    """--quick analytics: the 1M database if it is already built, else a 100k one."""
    if not cfg.rebuild and dataset.is_built(cfg.pg, "cadence_bench_1m", 1_000_000):
        cfg.notes.append("--quick: analytics on the existing 1,000,000-run database")
    else:
        cfg.dataset_runs = 100_000
        cfg.notes.append("--quick: analytics on a 100,000-run database (1M not built yet)")


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    cfg = config(args)
    procs.install_signal_handlers()
    started, t0 = datetime.now(UTC), time.perf_counter()
    results: list[dict[str, Any]] = []

    machine = procs.machine_info(REPO)
    try:
        machine["postgresql"] = pg_version(cfg.pg)
    except Exception as exc:
        machine["postgresql"] = None
        results.append({"group": "setup", "name": "PostgreSQL", "error": f"unreachable: {exc}"})
    if "ingest" in cfg.phases and ensure_wrk() is None:
        results.append({"group": "setup", "name": "wrk", "error": "wrk missing; apt-get failed"})
    machine["wrk"] = procs.wrk_version()
    if cfg.quick and "analytics" in cfg.phases:
        _quick_dataset(cfg)
    procs.say(
        f"Cadence benchmark: phases={','.join(cfg.phases)} backends={','.join(cfg.backends)} "
        f"workers={cfg.workers} repeat={cfg.repeat}{' QUICK' if cfg.quick else ''}"
    )
    for note in cfg.notes:
        procs.say(f"  {note}")
    try:
        if machine["postgresql"] is None:
            cfg.backends = tuple(b for b in cfg.backends if b != "postgresql")
        if {"ingest", "baseline"} & set(cfg.phases):
            run_ingest(cfg, results)
        if "analytics" in cfg.phases and machine["postgresql"] is not None:
            run_analytics(cfg, results)
        if "org" in cfg.phases and machine["postgresql"] is not None:
            run_org(cfg, results)
        if "client" in cfg.phases:
            run_client(cfg, results)
        if "sources" in cfg.phases and machine["postgresql"] is not None:
            run_sources(cfg, results)
        if "bill" in cfg.phases and machine["postgresql"] is not None:
            run_bill(cfg, results)
    except KeyboardInterrupt:
        procs.say("\ninterrupted: reporting what was measured")
        results.append({"group": "setup", "name": "run", "error": "interrupted"})
    except BenchError as exc:
        results.append({"group": "setup", "name": "run", "error": str(exc)})
    except Exception as exc:  # report what was measured whatever went wrong
        procs.say(traceback.format_exc(), err=True)
        results.append({"group": "setup", "name": "run", "error": f"{type(exc).__name__}: {exc}"})
    finally:
        procs.kill_all()
    machine["loadavg_at_end"] = procs.loadavg()
    end = procs.machine_info(REPO)
    machine["git_commit_at_end"] = end["git_commit"]
    if end["git_commit"] != machine["git_commit"] or end["git_dirty"] != machine["git_dirty"]:
        cfg.notes.append(
            f"the work tree changed during the run ({str(machine['git_commit'])[:10]} -> "
            f"{str(end['git_commit'])[:10]}, dirty {machine['git_dirty']} -> {end['git_dirty']}): "
            "servers started later ran newer code"
        )
    text = report.write(results, cfg, machine, started, time.perf_counter() - t0)
    procs.say("\n" + text)
    procs.say(f"\nwrote {cfg.results_dir / 'latest.json'} and {cfg.results_dir / 'latest.md'}")
    return 1 if any(r.get("error") for r in results) else 0
