"""``cadence import slurm``: Slurm accounting records become attempts in Cadence.

Reads a saved ``sacct --json`` or ``sacct -P`` file (``--file``), or runs sacct itself
(parsable output, with TZ=UTC so that its times need no guessing, into a scratch file).
The file is read twice, streaming: once to check every record, once to post them.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, tzinfo
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cadence_client.commands.report import USAGE

from app.sources.enrich_command import fill_and_post, prometheus_args
from app.sources.posting import Mapped, error, importer_args
from app.sources.sacct import PARSABLE_FIELDS, SacctError, attempts, open_text
from app.sources.slurm import Options, map_attempt

SACCT_TIMEOUT = 600  # seconds: a year of a big site's accounting can take minutes

EXIT_CODES = """exit codes:
  0  done (records that could not be read still exit 0; each is listed)
  1  a record is invalid (nothing stored), or Cadence refused a run (422)
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
    p.add_argument(
        "--timezone",
        default="UTC",
        help="-P file: the zone of its times without an offset (UTC); an offset is kept",
    )
    p.add_argument(
        "--encoding",
        help="the file's encoding when not UTF-8 (e.g. latin-1); a byte-order mark wins",
    )
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
    options = Options(
        pipeline=args.pipeline, pipeline_from=args.pipeline_from, variant=args.variant
    )
    with tempfile.TemporaryDirectory(prefix="cadence-sacct-") as scratch:
        try:
            path = args.file or run_sacct(args.since, Path(scratch) / "sacct.txt")
            records = Records(path, args.encoding, tz, options)
        except SacctError as exc:
            error(str(exc))
            return USAGE
        return fill_and_post(args, records, prometheus_transport, **post)


class Records:
    """The file's mapped records, read again from its start each time they are iterated
    (the check, then the posts): one record and one batch held at a time."""

    def __init__(self, path: Path, encoding: str | None, tz: tzinfo, options: Options) -> None:
        self.path, self.encoding, self.tz, self.options = path, encoding, tz, options
        self.passes = 0
        self.checked: tuple[int, int] | None = None  # the file's size and mtime at the check

    def __iter__(self) -> Iterator[Mapped]:
        self.passes += 1
        self._same_file()
        count = 0
        with open_text(self.path, self.encoding) as handle:
            for attempt in attempts(handle, self.tz):
                count += 1
                yield map_attempt(attempt, self.options)
        if self.passes == 1:
            print(f"read {count} Slurm job records", file=sys.stderr)

    def _same_file(self) -> None:
        """The posts read the file the check read: one changed in between refuses the
        import before its first post."""
        try:
            stat = self.path.stat()
        except OSError as exc:
            raise SacctError(f"--file {self.path}: {exc.strerror or exc}") from exc
        now = (stat.st_size, stat.st_mtime_ns)
        if self.checked is not None and now != self.checked:
            raise SacctError(f"--file {self.path} changed while it was being imported")
        self.checked = now


def run_sacct(since: str | None, out: Path) -> Path:
    """sacct's parsable output for every user since ``since``, times in UTC, written to
    ``out`` (read from there twice, never held whole)."""
    if shutil.which("sacct") is None:
        raise SacctError("sacct is not on PATH: pass --file with saved sacct output")
    try:
        start = datetime.fromisoformat(since) if since else datetime.now(UTC) - timedelta(30)
    except ValueError as exc:
        raise SacctError(f"--since {since!r}: expected YYYY-MM-DD") from exc
    command = [
        "sacct",
        "--allusers",
        "--duplicates",
        "--parsable2",
        "--noconvert",
        f"--starttime={start:%Y-%m-%dT%H:%M:%S}",
        f"--format={PARSABLE_FIELDS}",
    ]
    try:
        with out.open("wb") as sink:
            done = subprocess.run(
                command,
                stdout=sink,
                stderr=subprocess.PIPE,
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
    return out
