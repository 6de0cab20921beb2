"""``cadence import slurm``: Slurm accounting records become attempts in Cadence.

Reads a saved ``sacct --json`` or ``sacct -P`` file (``--file``), or runs sacct itself
(parsable output, with TZ=UTC so that its times need no guessing).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cadence_client.commands.report import USAGE

from app.sources.enrich_command import fill_and_post, prometheus_args
from app.sources.posting import error, importer_args
from app.sources.slurm import PARSABLE_FIELDS, Options, SacctError, map_all, parse

SACCT_TIMEOUT = 600  # seconds: a year of a big site's accounting can take minutes

EXIT_CODES = """exit codes:
  0  done (records that could not be read still exit 0; each is listed)
  1  Cadence refused a run (422)
  2  usage, unreadable file, or sacct failed
  3  conflict (409): a run is already stored with different values
  4  authentication (401) or authorization (403) failed
  5  Cadence was unavailable after retries"""


def add_parser(isub: Any) -> None:
    """Register ``import slurm`` on the ``cadence import`` subparsers."""
    p = isub.add_parser(
        "slurm",
        help="import Slurm accounting records (sacct) as attempts",
        description="Each job record of sacct is one attempt; a requeued job's records are "
        "attempts of one retraining. GPUs from AllocTRES gres/gpu, queue wait from "
        "Eligible to Start, outcome from State. Re-running stores nothing twice.",
        epilog=EXIT_CODES + f"\n\nsaving a file to import:\n  TZ=UTC sacct -a -D -P "
        f"-S 2026-11-01 --format={PARSABLE_FIELDS} > jobs.txt\n  sacct -a -D --json "
        "-S 2026-11-01 > jobs.json",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--file", type=Path, help="saved sacct --json or sacct -P output")
    p.add_argument(
        "--since", help="with sacct: the first day to read (default: 30 days ago), YYYY-MM-DD"
    )
    p.add_argument("--timezone", default="UTC", help="-P file: the zone of its times (UTC)")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--pipeline", help="one Cadence pipeline for every job")
    which.add_argument(
        "--pipeline-from",
        choices=("name", "account"),
        default="name",
        help="else each job's pipeline is its job name or account, as a slug (default: name)",
    )
    prometheus_args(p, 'hpc_job="{slurm_job_id}"')
    importer_args(p)
    p.set_defaults(func=lambda _settings, args: run_import(args))


def run_import(args: argparse.Namespace, prometheus_transport: Any = None, **post: Any) -> int:
    try:
        tz = ZoneInfo(args.timezone)
    except (ZoneInfoNotFoundError, ValueError):
        error(f"--timezone {args.timezone!r}: not a time zone name (e.g. UTC, Europe/Paris)")
        return USAGE
    try:
        text = read_file(args.file) if args.file else run_sacct(args.since)
        attempts = parse(text, tz)
    except (SacctError, OSError) as exc:
        error(str(exc))
        return USAGE
    options = Options(
        pipeline=args.pipeline, pipeline_from=args.pipeline_from, variant=args.variant
    )
    print(f"read {len(attempts)} Slurm job records", file=sys.stderr)
    mapped = map_all(attempts, options)
    return fill_and_post(args, mapped, prometheus_transport, **post)


def read_file(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise SacctError(f"--file {path}: {exc.strerror or exc}") from exc


def run_sacct(since: str | None) -> str:
    """sacct's parsable output for every user since ``since``, times in UTC."""
    if shutil.which("sacct") is None:
        raise SacctError("sacct is not on PATH: pass --file with saved sacct output")
    try:
        start = datetime.fromisoformat(since) if since else datetime.now(UTC) - timedelta(30)
    except ValueError as exc:
        raise SacctError(f"--since {since!r}: expected YYYY-MM-DD") from exc
    command = [
        "sacct", "--allusers", "--duplicates", "--parsable2", "--noconvert",
        f"--starttime={start:%Y-%m-%dT%H:%M:%S}", f"--format={PARSABLE_FIELDS}",
    ]  # fmt: skip
    try:
        done = subprocess.run(
            command,
            capture_output=True,
            text=True,
            timeout=SACCT_TIMEOUT,
            env={**os.environ, "TZ": "UTC"},
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise SacctError(f"sacct did not answer in {SACCT_TIMEOUT} s") from exc
    if done.returncode != 0:
        detail = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise SacctError(f"sacct failed (exit {done.returncode}): {detail}")
    return done.stdout
