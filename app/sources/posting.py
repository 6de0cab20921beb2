"""What every importer shares: the records it could not read, the dry-run table, and
batched posts through cadence-client with progress and errors named by record.

All or nothing: the whole input is read and checked first (``checks``: the server's
own rules), keeping counts only, and one bad record refuses it before anything is
posted, naming the record. Then a second pass posts it in batches, one batch held at a
time. Batches are separate requests (each stored whole); if the server still refuses
one (a conflict with a run stored earlier, a stricter setting), the importer says
exactly which runs are stored and which are not.

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
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import httpx
from cadence_client import CadenceAPIError, ConflictError, ServiceUnavailable
from cadence_client.commands.report import (
    BATCH_SIZE,
    OK,
    REFUSED,
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
from app.sources.checks import Check

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
    invalid: bool = False  # nothing stored because a value is wrong: the input is refused
    notes: tuple[str, ...] = field(default_factory=tuple)


class SourceError(Exception):
    """The input cannot be read (any more): a file that is not sacct output, say."""


# Run on each batch just before it is posted (utilization from Prometheus).
Prepare = Callable[[list[Mapped]], None]


@dataclass
class Tally:
    created: int = 0
    existing: int = 0
    enriched: int = 0  # stored, with measurements filled in since
    completed: int = 0  # stored as running by an earlier import, finished now

    @property
    def stored(self) -> int:
        return self.created + self.existing + self.enriched + self.completed


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


def check_all(mapped: Iterable[Mapped]) -> Check:
    """The first pass over the input: every record read and checked, the records
    nothing is stored from listed with the reason; nothing is kept but counts."""
    check = Check()
    for m in mapped:
        if m.payload is None and not m.invalid:
            print(f"not imported: {m.source}: {m.reason}", file=sys.stderr)
        for note in m.notes:
            print(f"note: {m.source}: {note}", file=sys.stderr)
        check.add(m.source, m.payload, m.reason, m.invalid)
    return check


def summary_table(payloads: Iterable[dict[str, Any]]) -> str:
    """Per pipeline: retrainings, attempts by outcome, GPU-hours, runs without utilization."""
    rows = totals(attempt_of(p) for p in payloads)
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
    mapped: Iterable[Mapped],
    *,
    prepare: Prepare | None = None,
    transport: httpx.BaseTransport | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Check every record (a first pass over ``mapped``), then post the readable ones in
    batches (a second pass: ``mapped`` is a list, or reads its input again each time it
    is iterated). One bad record refuses the whole input before anything is posted."""
    try:
        check = check_all(mapped)
    except SourceError as exc:
        error(f"{exc}; nothing was stored")
        return USAGE
    if check.bad:
        error(check.refusal())
        return REFUSED
    if args.dry_run:
        try:
            print(summary_table(m.payload or {} for c in batches(mapped, prepare) for m in c))
        except SourceError as exc:
            error(str(exc))
            return USAGE
        print(
            f"dry run: read {check.read}, would import {check.ready}, could not read "
            f"{check.skipped}; nothing posted",
            file=sys.stderr,
        )
        return OK
    token = args.token or os.environ.get("CADENCE_TOKEN")
    if not token:
        error("no token: pass --token or set CADENCE_TOKEN (an ingest token)")
        return USAGE
    return _post_all(args, mapped, check, Posting(prepare, token, transport, sleep))


@dataclass(frozen=True)
class Posting:
    prepare: Prepare | None
    token: str
    transport: httpx.BaseTransport | None
    sleep: Callable[[float], None]


def batches(mapped: Iterable[Mapped], prepare: Prepare | None) -> Iterator[list[Mapped]]:
    """The readable records in batches, each ``prepare``d (utilization filled in) when
    it is reached: one batch is held at a time."""
    chunk: list[Mapped] = []
    for m in mapped:
        if m.payload is not None:
            chunk.append(m)
        if len(chunk) == BATCH_SIZE:
            if prepare:
                prepare(chunk)
            yield chunk
            chunk = []
    if chunk:
        if prepare:
            prepare(chunk)
        yield chunk


def _post_all(args: argparse.Namespace, mapped: Iterable[Mapped], check: Check, p: Posting) -> int:
    tally, at = Tally(), ""
    try:
        with client_for(args, p.token, p.transport, p.sleep) as client:
            for chunk in batches(mapped, p.prepare):
                at = chunk[0].source
                try:
                    _post_chunk(client, chunk, tally)
                except CadenceAPIError as exc:
                    _refused(exc, chunk)
                    _stopped(check, tally, at)
                    return _exit_code(exc)
                done = tally.stored
                if check.ready > BATCH_SIZE and (done % PROGRESS_EVERY == 0 or done == check.ready):
                    print(f"posted {done:,}/{check.ready:,}", file=sys.stderr)
    except ServiceUnavailable as exc:
        error(f"Cadence unreachable at {exc.url}: {exc.message}")
        _stopped(check, tally, at)
        return UNAVAILABLE
    except SourceError as exc:  # the input changed between the two passes
        error(str(exc))
        _stopped(check, tally, at)
        return USAGE
    except (httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:
        error(f"bad --url: {exc}")
        return USAGE
    _done(check, tally)
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


def _done(check: Check, tally: Tally) -> None:
    finished = f" / {tally.completed} running before, finished now" if tally.completed else ""
    print(
        f"read {check.read}, imported {tally.stored} ({_counts(tally)}{finished}), "
        f"could not read {check.skipped}"
    )


def _stopped(check: Check, tally: Tally, at: str) -> None:
    """Exactly what is stored when a batch after the first is refused: batches are
    separate requests, each stored whole or not at all."""
    error(
        f"stopped at the batch starting with {at or 'the first record'}: stored are the first "
        f"{tally.stored} of the {check.ready} runs to import ({_counts(tally)}); not stored "
        f"are the {check.ready - tally.stored} from {at or 'the first record'} on. Fix the "
        "problem and run again: the stored ones come back as already there"
    )


def _counts(tally: Tally) -> str:
    """How the stored runs were stored, said alike by the summary and the stop."""
    enriched = f", {tally.enriched} of them enriched since" if tally.enriched else ""
    return f"{tally.created} created / {tally.existing + tally.enriched} already there{enriched}"
