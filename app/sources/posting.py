"""What every importer shares: the records it could not read, the dry-run table, and
batched posts through cadence-client with progress and errors named by record.

Re-running an import stores nothing twice: each record's run id comes from the source
(a Slurm job id and start, a Job uid), and the server answers an identical run as
"existing". A run whose stored measurements were filled in later (``cadence enrich``)
differs from the source's record only in those fields; it is counted as already there
instead of failing the batch with a conflict.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import httpx
from cadence_client import CadenceAPIError, ConflictError, ServiceUnavailable
from cadence_client.commands.report import (
    BATCH_SIZE,
    OK,
    UNAVAILABLE,
    USAGE,
    _connection_args,
    _exit_code,
    client_for,
)
from cadence_client.refusal import print_refusal

from app.measurements.schemas import MEASUREMENT_FIELDS
from app.planning.imports import Attempt, totals
from app.schemas_common import CONTROL_CHARACTERS

# Fields `cadence enrich` may change on a stored run: a re-import that differs only here
# is the same run.
MEASUREMENTS = frozenset(MEASUREMENT_FIELDS)
CONTROL = re.compile(f"[{CONTROL_CHARACTERS}]")
FIELD_PATH = re.compile(r"^runs\.(\d+)\.(.+)$")
PROGRESS_EVERY = 10 * BATCH_SIZE  # runs between two progress lines


@dataclass(frozen=True)
class Mapped:
    """One source record: its payload, or why nothing is stored from it."""

    source: str  # how the user names it: "job 4242 (cluster hpc)"
    payload: dict[str, Any] | None = None
    reason: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)


@dataclass
class Tally:
    created: int = 0
    existing: int = 0
    enriched: int = 0  # stored, with measurements filled in since
    completed: int = 0  # stored as running by an earlier import, finished now


def tags(values: dict[str, Any]) -> dict[str, str]:
    """Tags from a source's names: empty ones left out, control characters (which the
    run record refuses) removed, each cut to the 500 characters a tag value holds."""
    cleaned = {k: CONTROL.sub("", str(v))[:500] for k, v in values.items() if v}
    return {k: v for k, v in cleaned.items() if v}


def importer_args(p: argparse.ArgumentParser) -> None:
    """The options every importer has: the variant, --dry-run, and where to post."""
    p.add_argument("--variant", default="baseline", help="the variant of every run")
    p.add_argument("--dry-run", action="store_true", help="print a summary table; post nothing")
    _connection_args(p, "an ingest token (default: $CADENCE_TOKEN; not needed with --dry-run)")


def error(message: str) -> None:
    print(f"cadence: {message}", file=sys.stderr)


def report_unread(mapped: Sequence[Mapped]) -> int:
    """List every record nothing is stored from, with the reason; returns how many."""
    skipped = [m for m in mapped if m.payload is None]
    for m in skipped:
        print(f"not imported: {m.source}: {m.reason}", file=sys.stderr)
    for m in mapped:
        for note in m.notes:
            print(f"note: {m.source}: {note}", file=sys.stderr)
    return len(skipped)


def summary_table(mapped: Sequence[Mapped]) -> str:
    """Per pipeline: retrainings, attempts by outcome, GPU-hours, runs without utilization."""
    rows = totals(attempt_of(m.payload) for m in mapped if m.payload is not None)
    lines = [
        f"{'PIPELINE':<32} {'RETRAININGS':>11} {'ATTEMPTS':>8} {'OK':>6} {'FAILED':>6} "
        f"{'PREEMPT':>7} {'CANCEL':>6} {'GPU-HOURS':>11} {'NO UTIL':>7}"
    ]
    for name in sorted(rows):
        r, n = rows[name], rows[name].by_outcome
        lines.append(
            f"{name:<32} {len(r.retrainings):>11} {r.attempts:>8} {n['succeeded']:>6} "
            f"{n['failed']:>6} {n['preempted']:>7} {n['cancelled']:>6} "
            f"{r.gpu_hours:>11.2f} {r.without_utilization:>7}"
        )
    return "\n".join(lines)


def attempt_of(payload: dict[str, Any]) -> Attempt:
    start = datetime.fromisoformat(payload["started_at"])
    # A running attempt (no finish yet) has no GPU-hours to count.
    end = datetime.fromisoformat(payload.get("finished_at") or payload["started_at"])
    return Attempt(
        pipeline=payload["pipeline"],
        retraining=payload.get("retraining_id", payload["run_id"]),
        outcome=payload.get("outcome", "succeeded"),
        workers=payload["workers"],
        wall_clock_hours=(end - start).total_seconds() / 3600,
        has_utilization="gpu_utilization" in payload,
    )


def post_mapped(
    args: argparse.Namespace,
    mapped: Sequence[Mapped],
    *,
    transport: httpx.BaseTransport | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Dry run: the table. Otherwise post the readable records in batches."""
    skipped = report_unread(mapped)
    ready = [m for m in mapped if m.payload is not None]
    if args.dry_run:
        print(summary_table(mapped))
        print(
            f"dry run: read {len(mapped)}, would import {len(ready)}, could not read "
            f"{skipped}; nothing posted",
            file=sys.stderr,
        )
        return OK
    token = args.token or os.environ.get("CADENCE_TOKEN")
    if not token:
        error("no token: pass --token or set CADENCE_TOKEN (an ingest token)")
        return USAGE
    tally = Tally()
    try:
        with client_for(args, token, transport, sleep) as client:
            for offset in range(0, len(ready), BATCH_SIZE):
                chunk = ready[offset : offset + BATCH_SIZE]
                try:
                    _post_chunk(client, chunk, tally)
                except CadenceAPIError as exc:
                    _refused(exc, chunk)
                    _done(len(mapped), tally, skipped, partial=True)
                    return _exit_code(exc)
                done = offset + len(chunk)
                if len(ready) > BATCH_SIZE and (done % PROGRESS_EVERY == 0 or done == len(ready)):
                    print(f"posted {done:,}/{len(ready):,}", file=sys.stderr)
    except ServiceUnavailable as exc:
        error(f"Cadence unreachable at {exc.url}: {exc.message}")
        _done(len(mapped), tally, skipped, partial=True)
        return UNAVAILABLE
    except (httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:
        error(f"bad --url: {exc}")
        return USAGE
    _done(len(mapped), tally, skipped)
    return OK


def _post_chunk(client: Any, chunk: list[Mapped], tally: Tally) -> None:
    payloads = [m.payload for m in chunk if m.payload]
    try:
        result = client.post_runs(payloads, batch_size=BATCH_SIZE)
    except ConflictError as exc:
        enriched = measurement_only_conflicts(exc.fields)
        if not enriched:
            raise
        rest = [p for i, p in enumerate(payloads) if i not in enriched]
        result = client.post_runs(rest, batch_size=BATCH_SIZE) if rest else None
        tally.enriched += len(enriched)
    if result is not None:
        tally.created += result.created
        tally.existing += result.existing
        tally.completed += result.completed


def measurement_only_conflicts(fields: list[dict[str, Any]]) -> set[int]:
    """Indices of conflicting runs, if every conflict is in a measurement field (the run
    was enriched after it was imported); empty if any other field differs."""
    indices: set[int] = set()
    for item in fields:
        match = FIELD_PATH.match(str(item.get("field", "")))
        if match is None or match.group(2) not in MEASUREMENTS:
            return set()
        indices.add(int(match.group(1)))
    return indices


def _refused(exc: CadenceAPIError, chunk: list[Mapped]) -> None:
    """Each refused field named by the record it came from (``sacct job 4242``)."""
    print_refusal(exc, lambda index: chunk[index].source if index < len(chunk) else None)


def _done(read: int, tally: Tally, skipped: int, partial: bool = False) -> None:
    line = (
        f"read {read}, imported "
        f"{tally.created + tally.existing + tally.enriched + tally.completed} "
        f"({tally.created} created / {tally.existing + tally.enriched} already there"
        + (f", {tally.enriched} of them enriched since" if tally.enriched else "")
        + (f" / {tally.completed} running before, finished now" if tally.completed else "")
        + f"), could not read {skipped}"
    )
    if partial:
        error(f"stopped early: {line}")
    else:
        print(line)
