"""Reading sacct output (``sacct --json`` or ``sacct -P``) as a stream of job records.

Memory stays bounded whatever the file's size: the parsable text is read a line at a
time, and the JSON one job record at a time (the ``jobs`` array is never held whole; one
record may be at most ``MAX_RECORD_CHARS``). A file is read as UTF-8 unless a
byte-order mark says UTF-8-with-BOM or UTF-16, or ``--encoding`` declares another
encoding: bytes that are not text in that encoding refuse the file, never becoming
U+FFFD silently.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from typing import IO, Any

from app.sources.posting import SourceError
from app.sources.sacct_exit import json_failure, json_step_name, text_failure
from app.sources.sacct_json import JsonReader

# Slurm's -P columns (a saved file must have the required ones; AllocTRES or AllocGRES
# for the GPUs).
PARSABLE_FIELDS = (
    "JobIDRaw,JobID,JobName,Account,Cluster,Partition,User,State,Submit,Eligible,Start,End,"
    "AllocTRES,TRESUsageInAve,DerivedExitCode,ExitCode,NodeList"
)
# JobIDRaw and Cluster make the run ids the JSON of the same jobs gives.
REQUIRED_COLUMNS = ("JobIDRaw", "JobID", "Cluster", "State", "Submit", "Start", "End")
CHUNK = 1 << 16  # characters read at a time
BOMS = ((b"\xef\xbb\xbf", "utf-8-sig"), (b"\xff\xfe", "utf-16"), (b"\xfe\xff", "utf-16"))
LEADING_SPACE = re.compile(r"\s*")


class SacctError(SourceError):
    """The accounting data cannot be read at all (not JSON, no header, no columns)."""


@dataclass
class Attempt:
    """One accounting record of a job, in the units both sacct formats share."""

    job_id: str
    name: str = ""
    account: str = ""
    cluster: str = ""
    partition: str = ""
    nodes: str = ""  # NodeList, compressed: gpu-[01-02]
    user: str = ""
    state: str = ""
    submit: datetime | None = None
    eligible: datetime | None = None
    start: datetime | None = None
    end: datetime | None = None
    tres: dict[str, float] = field(default_factory=dict)  # AllocTRES, e.g. gres/gpu -> 4
    gres: str = ""  # AllocGRES / GresUsed text, the fallback for GPUs
    gpu_util: list[float] = field(default_factory=list)  # steps' gres/gpuutil, percent
    derived_exit: str = ""  # DerivedExitCode when a step failed ("3:0"), else ""
    failed_steps: list[str] = field(default_factory=list)  # "41.0": steps that exited non-zero
    step_exits_read: bool = False  # the steps' own exit codes were there to read


# -- the file's encoding ---------------------------------------------------------------


def open_text(path: Path, encoding: str | None = None) -> IO[str]:
    """``path`` opened as text: the encoding its byte-order mark names, else
    ``encoding``, else UTF-8. A UTF-16 file without a mark is refused, saying so."""
    try:
        with path.open("rb") as raw:
            head = raw.read(4)
        chosen = next((name for bom, name in BOMS if head.startswith(bom)), None)
        if chosen is None and encoding is None and b"\x00" in head:
            raise SacctError(
                f"--file {path}: looks like UTF-16 without a byte-order mark; save it as "
                "UTF-8, or pass --encoding utf-16-le (or utf-16-be)"
            )
        return path.open(encoding=chosen or encoding or "utf-8", errors="strict")
    except LookupError as exc:
        raise SacctError(f"--encoding {encoding!r}: not an encoding Python knows") from exc
    except OSError as exc:
        raise SacctError(f"--file {path}: {exc.strerror or exc}") from exc


def _undecodable(exc: UnicodeDecodeError, where: str) -> SacctError:
    byte = exc.object[exc.start : exc.start + 1].hex()
    return SacctError(
        f"{where}: byte 0x{byte} is not {exc.encoding} text (pass --encoding with the "
        "file's encoding, e.g. --encoding latin-1, or convert it to UTF-8)"
    )


# -- either format ---------------------------------------------------------------------


def attempts(handle: IO[str], tz: tzinfo = UTC) -> Iterator[Attempt]:
    """Every job record of the file, one at a time (``--json`` or ``-P``: its first
    character says which). Raises SacctError when the file stops being readable."""
    try:
        first = handle.read(CHUNK)
    except UnicodeDecodeError as exc:  # the bytes decoded so far start the file
        line = bytes(exc.object[: exc.start]).count(b"\n") + 1
        raise _undecodable(exc, f"line {line}") from exc
    start = LEADING_SPACE.match(first)
    if start is not None and first[start.end() : start.end() + 1] == "{":
        yield from _json_attempts(JsonReader(first, handle, SacctError))
    else:
        yield from parsable_attempts(_lines(first, handle), tz)


def _lines(first: str, handle: IO[str]) -> Iterator[str]:
    number = 0
    try:
        head = first + handle.readline()  # the first chunk's last line, completed
        for line in head.splitlines():
            number += 1
            yield line
        for line in handle:
            number += 1
            yield line.rstrip("\r\n")
    except UnicodeDecodeError as exc:
        raise _undecodable(exc, f"after line {number}") from exc


# -- sacct --json ----------------------------------------------------------------------


def _json_attempts(reader: JsonReader) -> Iterator[Attempt]:
    for job in reader.items_of("jobs"):
        if isinstance(job, dict):
            yield json_attempt(job)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def json_attempt(job: dict[str, Any]) -> Attempt:
    """One job of ``sacct --json``; parts of the wrong shape read as absent."""
    times, state = _dict(job.get("time")), job.get("state") or {}
    current = state.get("current") if isinstance(state, dict) else state
    if isinstance(current, list):
        current = current[0] if current else ""
    tres = {}
    for item in _list(_dict(job.get("tres")).get("allocated")):
        item = _dict(item)
        kind, name = str(item.get("type", "")), str(item.get("name") or "")
        tres[f"{kind}/{name}" if name else kind] = number(item.get("count"))
    util, failed, read = [], [], False
    for step in _list(job.get("steps")):
        read = read or "exit_code" in _dict(step)
        if json_failure(_dict(step).get("exit_code")):
            failed.append(json_step_name(_dict(step), str(job.get("job_id", ""))))
        average = _dict(_dict(_dict(step).get("tres")).get("requested")).get("average")
        for item in _list(average):
            item = _dict(item)
            if item.get("type") == "gres" and item.get("name") == "gpuutil":
                value = number(item.get("count"))
                if value is not None:
                    util.append(value)
    return Attempt(
        job_id=str(job.get("job_id", "")),
        name=str(job.get("name") or ""),
        account=str(job.get("account") or ""),
        cluster=str(job.get("cluster") or ""),
        partition=str(job.get("partition") or ""),
        nodes=str(job.get("nodes") or ""),
        user=str(job.get("user") or ""),
        state=str(current or ""),
        submit=_epoch(times.get("submission")),
        eligible=_epoch(times.get("eligible")),
        start=_epoch(times.get("start")),
        end=_epoch(times.get("end")),
        tres={k: v for k, v in tres.items() if v is not None},
        gres=str(job.get("used_gres") or ""),
        gpu_util=util,
        derived_exit=json_failure(job.get("derived_exit_code")),
        failed_steps=failed,
        step_exits_read=read,
    )


def number(value: Any) -> float | None:
    """A count as sacct --json writes it: a number, or {set, infinite, number}. Inf and
    NaN are kept (the mapping refuses them by name); an unset or "infinite" is None."""
    if isinstance(value, dict):
        if not value.get("set", True) or value.get("infinite"):
            return None
        value = value.get("number")
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _epoch(value: Any) -> datetime | None:
    seconds = number(value)
    if seconds is None or not math.isfinite(seconds) or seconds <= 0:  # 0: not yet
        return None
    try:
        return datetime.fromtimestamp(seconds, UTC)
    except (OverflowError, OSError, ValueError):  # 1e308 s: no time at all
        return None


# -- sacct -P --------------------------------------------------------------------------


def parsable_attempts(lines: Iterator[str], tz: tzinfo = UTC) -> Iterator[Attempt]:
    """``sacct -P -D --format=...``: a header, then a job's line and its steps' lines.

    Times without an offset are the cluster's local time as sacct printed them: ``tz``
    says which (the importer runs sacct with TZ=UTC itself); a time with an explicit
    offset keeps it."""
    header = next((line.split("|") for line in lines if line.strip()), None)
    if header is None:
        return
    missing = [c for c in REQUIRED_COLUMNS if c not in header]
    if missing:
        raise SacctError(
            f"sacct -P output lacks column(s) {', '.join(missing)} (JobIDRaw and Cluster "
            "give the run ids the JSON of the same jobs gives); write it again with: "
            f"sacct -a -D -P --format={PARSABLE_FIELDS} -S YYYY-MM-DD > jobs.txt"
        )
    current: Attempt | None = None
    for line in lines:
        if not line.strip():
            continue
        row = dict(zip(header, line.split("|"), strict=False))
        raw = row.get("JobIDRaw") or row.get("JobID") or ""
        if "." in raw:  # a step (123.batch, 123.0): its usage belongs to the job above
            if current is not None and current.job_id == raw.split(".")[0]:
                current.gpu_util += _tres_util(row.get("TRESUsageInAve", ""))
                current.step_exits_read = current.step_exits_read or "ExitCode" in row
                if text_failure(row.get("ExitCode", "")):
                    current.failed_steps.append(raw)
            continue
        if current is not None:
            yield current
        current = _parsable_attempt(raw, row, tz)
    if current is not None:
        yield current


def _parsable_attempt(job_id: str, row: dict[str, str], tz: tzinfo) -> Attempt:
    return Attempt(
        job_id=job_id,
        name=row.get("JobName", ""),
        account=row.get("Account", ""),
        cluster=row.get("Cluster", ""),
        partition=row.get("Partition", ""),
        nodes=row.get("NodeList", ""),
        user=row.get("User", ""),
        state=(row.get("State", "").split() or [""])[0],  # "CANCELLED by 1000"
        submit=local_time(row.get("Submit", ""), tz),
        eligible=local_time(row.get("Eligible", ""), tz),
        start=local_time(row.get("Start", ""), tz),
        end=local_time(row.get("End", ""), tz),
        tres=tres_counts(row.get("AllocTRES", "")),
        gres=row.get("AllocGRES", "") or row.get("GresUsed", ""),
        gpu_util=_tres_util(row.get("TRESUsageInAve", "")),
        derived_exit=text_failure(row.get("DerivedExitCode", "")),
    )


def local_time(value: str, tz: tzinfo) -> datetime | None:
    """A sacct time in UTC: ``tz`` for a time without an offset, its own offset else."""
    try:
        parsed = datetime.fromisoformat(value)
        return (parsed if parsed.tzinfo else parsed.replace(tzinfo=tz)).astimezone(UTC)
    except (ValueError, OverflowError):  # Unknown, None, empty; year 1 or 9999 in UTC
        return None


def tres_counts(text: str) -> dict[str, float]:
    """``billing=8,cpu=8,gres/gpu:a100=4,gres/gpu=4,mem=64G,node=1`` -> counts (an
    ``inf`` or ``nan`` is kept, for the mapping to refuse by name)."""
    found = {}
    for part in text.split(","):
        key, eq, value = part.partition("=")
        if eq and key.startswith("gres/"):
            try:
                found[key] = float(value)
            except ValueError:
                continue
    return found


def _tres_util(text: str) -> list[float]:
    value = tres_counts(text).get("gres/gpuutil")
    return [] if value is None else [value]
