"""``cadence report``: post runs from a file or flags, with exit codes a CI job can act
on (``export.py`` writes them back out; both share the connection flags here)."""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import httpx

from cadence_client.client import CadenceClient
from cadence_client.commands.precheck import check_all
from cadence_client.commands.records import Record, RecordError, iter_records
from cadence_client.errors import AuthError, CadenceAPIError, ConflictError, ServiceUnavailable
from cadence_client.refusal import print_refusal, run_name

OK, REFUSED, USAGE, CONFLICT, AUTH, UNAVAILABLE = 0, 1, 2, 3, 4, 5
BATCH_SIZE = 500
DEFAULT_URL = "http://127.0.0.1:8000"
EXIT_CODES = """exit codes:
  0  every run stored (created, or already there with identical values)
  1  a run is invalid: every run is checked here before the first is posted, and
     one bad run refuses the file (nothing stored); or the server refused it (422)
  2  usage or file error (missing token, unreadable file, bad CSV or JSON)
  3  conflict (409): a run_id is already stored with different values
  4  authentication (401) or authorization (403) failed
  5  the server was unavailable after retries (connection errors, 429, 5xx)"""
# --flag -> RunIn field, for one run given on the command line.
RUN_FLAGS: dict[str, tuple[str, type, str]] = {
    "pipeline": ("pipeline", str, "pipeline slug (required)"),
    "run_id": ("run_id", str, "your id for the run, unique per pipeline (required)"),
    "variant": ("variant", str, "variant label (server default: baseline)"),
    "started_at": ("started_at", str, "ISO 8601 with an offset (required)"),
    "finished_at": ("finished_at", str, "ISO 8601 with an offset (required)"),
    "workers": ("workers", int, "number of workers (required)"),
    "utilization": ("gpu_utilization", float, "busy fraction 0..1, e.g. 0.38 (omit if unknown)"),
    "outcome": ("outcome", str, "succeeded (default), failed, preempted or cancelled"),
    "retraining_id": ("retraining_id", str, "the retraining this attempt belongs to"),
    "utilization_source": (
        "utilization_source",
        str,
        "what measured it: nvml_gpu_util, dcgm_sm_active, mfu, ...",
    ),
    "gpu_type": ("gpu_type", str, "e.g. A100-80GB"),
    "gpu_hours": ("gpu_hours", float, "billed GPU-hours (default workers x wall clock)"),
    "price": ("price_per_gpu_hour", float, "USD per GPU-hour for this run"),
    "quality_metric": ("quality_metric", str, "e.g. ndcg@10"),
    "quality": ("quality_value", float, "the quality metric's value"),
    "data_stall_hours": ("data_stall_hours", float, "hours"),
    "checkpoint_hours": ("checkpoint_hours", float, "hours"),
    "scheduling_wait_hours": ("scheduling_wait_hours", float, "hours"),
    "mfu": ("mfu", float, "model FLOPs utilization, 0..1"),
}
METAVARS = {str: "TEXT", int: "N", float: "X"}
REQUIRED_FLAGS = ("pipeline", "run_id", "started_at", "finished_at", "workers")
# The flag a person typed for each field, for refusals of a run given by flags.
FLAG_OF_FIELD = {
    field: "--" + flag.replace("_", "-") for flag, (field, _k, _h) in RUN_FLAGS.items()
}


def add_parsers(sub: Any) -> None:
    """Register ``report`` on the ``cadence`` subcommand parser."""
    report = sub.add_parser(
        "report",
        help="post runs from a JSON, JSON lines or CSV file, or from flags",
        description="Post training runs to a Cadence server. Give --file, or the run "
        "flags for one run. Retries are safe: runs already stored with the same values "
        "count as 'already there'.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _connection_args(report, "an ingest token (default: $CADENCE_TOKEN; required)")
    report.add_argument(
        "--file",
        type=Path,
        help='runs as JSON (an object, a list, or {"runs": [...]}), .jsonl, or .csv '
        "(a header of field names; interruptions and tags as JSON; empty cell = omitted)",
    )
    one = report.add_argument_group("one run from flags (instead of --file)")
    for flag, (_field, kind, text) in RUN_FLAGS.items():
        one.add_argument(
            f"--{flag.replace('_', '-')}",
            dest=f"run_{flag}",
            type=kind,
            help=text,
            metavar=METAVARS[kind],
        )
    one.add_argument(
        "--tag", action="append", default=[], metavar="KEY=VALUE", help="a tag (repeatable)"
    )
    report.add_argument(
        "--progress", action="store_true", help="show progress even when stderr is not a TTY"
    )
    report.add_argument("-q", "--quiet", action="store_true", help="no progress, no summary")
    report.set_defaults(func=run_report)


def _connection_args(parser: argparse.ArgumentParser, token_help: str) -> None:
    parser.add_argument(
        "--url",
        default=None,
        help=f"Cadence server (default: $CADENCE_URL, else {DEFAULT_URL})",
    )
    parser.add_argument("--token", default=None, help=token_help)


def client_for(
    args: argparse.Namespace,
    token: str | None,
    transport: httpx.BaseTransport | None,
    sleep: Callable[[float], None],
) -> CadenceClient:
    """A client at ``--url`` (else $CADENCE_URL, else the local default)."""
    url = args.url or os.environ.get("CADENCE_URL") or DEFAULT_URL
    return CadenceClient(url, token, transport=transport, sleep=sleep)


def answer_with_client(
    args: argparse.Namespace,
    work: Callable[[CadenceClient], int],
    *,
    transport: httpx.BaseTransport | None,
    sleep: Callable[[float], None],
    terms: Mapping[str, str],
    lead: str,
) -> int:
    """``work(client)``'s exit code, with a client at ``--url`` and ``--token`` (else
    $CADENCE_TOKEN); else the exit code of what stopped it, said on stderr: the token
    refused (AUTH), the request refused (USAGE, its fields named as the flags ``terms``
    maps them to, after ``lead``), the server unavailable after retries (UNAVAILABLE), a
    bad ``--url`` (USAGE). ``cadence check`` and ``cadence plan`` answer this way."""
    token = args.token or os.environ.get("CADENCE_TOKEN") or None
    try:
        with client_for(args, token, transport, sleep) as client:
            return work(client)
    except AuthError as exc:
        print_refusal(exc)
        return AUTH
    except CadenceAPIError as exc:
        print_refusal(exc, terms=terms, lead=lead)
        return USAGE
    except UNREACHED as exc:
        return unreached(exc)


# The server not reached: down after retries, or a --url that is not one.
UNREACHED = (ServiceUnavailable, httpx.UnsupportedProtocol, httpx.InvalidURL)


def unreached(exc: Exception) -> int:
    """Say why the server was not reached (one of ``UNREACHED``); its exit code."""
    if isinstance(exc, ServiceUnavailable):
        _error(f"server unavailable at {exc.url}: {exc.message}")
        return UNAVAILABLE
    _error(f"bad --url: {exc}")
    return USAGE


def _runs(n: int) -> str:
    return f"{n} run" if n == 1 else f"{n} runs"


def _error(message: str) -> None:
    print(f"cadence: {message}", file=sys.stderr)


# report -------------------------------------------------------------------------------


def run_report(
    args: argparse.Namespace,
    *,
    transport: httpx.BaseTransport | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Check every run of the file (read once, a run at a time), then read it again
    and post it in batches of BATCH_SIZE: memory holds one batch, not the file."""
    token = args.token or os.environ.get("CADENCE_TOKEN")
    if not token:
        _error("no token: pass --token or set CADENCE_TOKEN (an ingest token)")
        return USAGE
    try:
        records, source = _records(args)
        # One run from flags is one request (stored whole), refused in the flags' names.
        bad, total = check_all(records()) if args.file is not None else (None, 1)
    except RecordError as exc:
        _error(str(exc))
        return USAGE
    if not total:
        _error(f"{source} holds no runs")
        return USAGE
    if bad is not None:
        _error(f"{source} {bad}")
        _error(f"nothing was stored: every run of {source} is checked before the first is sent")
        return REFUSED
    show = not args.quiet and (args.progress or sys.stderr.isatty()) and args.file is not None
    progress = Progress(total, sys.stderr) if show else None
    posted = Posted(total)
    try:
        with client_for(args, token, transport, sleep) as client:
            code = _post_all(client, records(), posted, progress, source, args.file is None)
        if code != OK:
            return code
    except RecordError as exc:  # the file changed since it was checked
        _error(str(exc))
        _stored_before(posted)
        return USAGE
    except ServiceUnavailable as exc:
        _error(f"server unavailable at {exc.url}: {exc.message}")
        _stored_before(posted)
        return UNAVAILABLE
    except (httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:
        _error(f"bad --url: {exc}")
        return USAGE
    except ValueError as exc:  # NaN or Infinity from a flag or JSON: refused before sending
        _error(f"{source}: {exc}")
        return USAGE
    finally:
        if progress:
            progress.close()
    if not args.quiet:
        print(f"{_runs(posted.done)} stored: {posted.created} created, "
              f"{posted.existing} already there")  # fmt: skip
    return OK


@dataclass
class Posted:
    """What the batches posted so far stored, and where they ended in the file."""

    total: int
    done: int = 0
    created: int = 0
    existing: int = 0
    last: str = ""  # where the last stored run came from
    next: str = ""  # where the first run not stored comes from


def _post_all(
    client: CadenceClient,
    records: Iterable[Record],
    posted: Posted,
    progress: Progress | None,
    source: str,
    from_flags: bool,
) -> int:
    """Post the records in batches; OK, or the exit code of a refusal (said)."""
    it = iter(records)
    while chunk := list(itertools.islice(it, BATCH_SIZE)):
        posted.next = chunk[0].where
        try:
            result = client.post_runs([r.run for r in chunk], batch_size=BATCH_SIZE)
        except CadenceAPIError as exc:
            if progress:
                progress.close()
            _refused(exc, chunk, source, from_flags)
            _stored_before(posted)
            return _exit_code(exc)
        posted.created += result.created
        posted.existing += result.existing
        posted.done += len(chunk)
        posted.last = chunk[-1].where
        if progress:
            progress.update(posted.done)
    return OK


def _records(args: argparse.Namespace) -> tuple[Callable[[], Iterable[Record]], str]:
    """A reader of the runs (called once to check them, once to post them) and what to
    call their source in messages."""
    flags = [f for f in RUN_FLAGS if getattr(args, f"run_{f}") is not None]
    if args.file is not None:
        if flags or args.tag:
            raise RecordError("give either --file or the run flags, not both")
        path: Path = args.file
        return (lambda: iter_records(path)), str(path)
    if not flags and not args.tag:
        raise RecordError("nothing to report: give --file PATH or the run flags (see --help)")
    one = [Record(run_from_flags(args), "the flags")]
    return (lambda: one), "the flags"


def run_from_flags(args: argparse.Namespace) -> dict[str, Any]:
    """The RunIn payload of the run flags (``--utilization`` -> ``gpu_utilization``...)."""
    missing = [f for f in REQUIRED_FLAGS if getattr(args, f"run_{f}") is None]
    if missing:
        names = ", ".join("--" + f.replace("_", "-") for f in missing)
        raise RecordError(f"missing {names} (required without --file)")
    run: dict[str, Any] = {}
    for flag, (field, _kind, _help) in RUN_FLAGS.items():
        value = getattr(args, f"run_{flag}")
        if value is not None:
            run[field] = value
    tags: dict[str, str] = {}
    for item in args.tag:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise RecordError(f"--tag {item!r}: expected KEY=VALUE")
        tags[key] = value
    if tags:
        run["tags"] = tags
    return run


def _exit_code(exc: CadenceAPIError) -> int:
    if isinstance(exc, AuthError):
        return AUTH
    return CONFLICT if isinstance(exc, ConflictError) else REFUSED


def _refused(exc: CadenceAPIError, chunk: Sequence[Record], source: str, from_flags: bool) -> None:
    """The refusal in the file's terms (``runs.csv line 5 (run r1)``) or the flags'
    (``--utilization``), never the request's (``runs.3.gpu_utilization``)."""

    def record(index: int) -> str | None:
        if index >= len(chunk):
            return None
        chosen = chunk[index]
        where = "" if from_flags else f"{source} {chosen.where}"
        return run_name(chosen.run, where)

    print_refusal(exc, record, FLAG_OF_FIELD if from_flags else {})


def _stored_before(posted: Posted) -> None:
    """Exactly what is stored when a batch after the first is refused: each batch is a
    request of its own, stored whole or not at all."""
    if posted.done:
        _error(
            f"stored are the first {posted.done} of the {posted.total} runs, up to "
            f"{posted.last} ({posted.created} created, {posted.existing} already there); not "
            f"stored are the {posted.total - posted.done} from {posted.next} on. Fix the "
            "problem and run again: the stored ones come back as already there"
        )


class Progress:
    """``[#####.....] 500/1000 runs`` on stderr: redrawn in place on a TTY, else a line
    per batch."""

    WIDTH = 30

    def __init__(self, total: int, stream: TextIO) -> None:
        self.total, self.stream = total, stream
        self.tty = stream.isatty()
        self.drawn = False
        self.update(0)

    def update(self, done: int) -> None:
        filled = self.WIDTH * done // self.total
        bar = f"[{'#' * filled}{'.' * (self.WIDTH - filled)}] {done}/{self.total} runs"
        self.stream.write(("\r" + bar) if self.tty else bar + "\n")
        self.stream.flush()
        self.drawn = True

    def close(self) -> None:
        if self.tty and self.drawn:
            self.stream.write("\n")
            self.stream.flush()
        self.drawn = False
