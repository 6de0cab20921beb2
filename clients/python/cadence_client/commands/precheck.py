"""Every run of a file checked on this machine before ``cadence report`` posts the first
batch, so that a file is refused whole instead of stopping part-way.

The server stores each batch all or nothing, but a file of 1,200 runs is three
requests: a run it refused in the third left the first two stored. The rules here are
the server's (``RunIn`` and its checks between fields, the future-start limit at its
default of 24 h); a server configured stricter, or one holding a run_id with other
values, can still refuse a later batch, and ``cadence report`` then says exactly which
runs are stored. tests/reporting/test_precheck.py holds these rules to the server's.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterable
from datetime import datetime, timedelta, timezone
from typing import Any

from cadence_client.commands.records import FLOAT_FIELDS, RUN_FIELDS, Record

SLUG = re.compile(r"^[a-z0-9](?:[a-z0-9_-]{0,61}[a-z0-9])?$")
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
REQUIRED = ("pipeline", "run_id", "started_at", "workers")
# "running": an attempt reported at its start (no finished_at, gpu_hours, utilization).
OUTCOMES = ("succeeded", "failed", "preempted", "cancelled", "running")
NOT_WHILE_RUNNING = ("finished_at", "gpu_hours", "gpu_utilization")
SOURCES = (
    "nvml_gpu_util",
    "dcgm_gpu_util",
    "dcgm_sm_active",
    "dcgm_gr_engine_active",
    "mfu",
    "other",
)
# Field -> (lowest, highest) as the server bounds it.
BOUNDS = {
    "gpu_utilization": (0.0, 1.0),
    "mfu": (0.0, 1.0),
    "gpu_hours": (1e-9, 1e9),
    "price_per_gpu_hour": (0.0, 10_000.0),
    "quality_value": (-1e12, 1e12),
    "data_stall_hours": (0.0, 1e6),
    "checkpoint_hours": (0.0, 1e6),
    "scheduling_wait_hours": (0.0, 1e6),
    "resumed_from_hours": (0.0, 1e6),
}
TEXT_LIMITS = {"run_id": 200, "variant": 64, "gpu_type": 64, "retraining_id": 200}
EARLIEST = datetime(1970, 1, 1, tzinfo=timezone.utc)
LATEST = datetime(2200, 12, 31, 23, 59, 59, tzinfo=timezone.utc)
FUTURE_TOLERANCE = timedelta(hours=24)  # the server's default
LONGEST = timedelta(days=366)
FRACTION = re.compile(r"\.(\d+)")


def _six_digits(match: re.Match[str]) -> str:
    """Fractions of a second as Python 3.9's fromisoformat wants them: six digits."""
    return "." + (match.group(1) + "000000")[:6]


def problems(run: dict[str, Any], now: datetime) -> list[str]:
    """``field: reason`` for each rule of the server's the run breaks."""
    found = [f"{name}: unknown field" for name in run if name not in RUN_FIELDS]
    found += [f"{name}: required" for name in REQUIRED if run.get(name) is None]
    if run.get("outcome") == "running":
        found += [f"{name}: a running attempt has none yet" for name in NOT_WHILE_RUNNING
                  if run.get(name) is not None]  # fmt: skip
    elif run.get("finished_at") is None:
        found.append("finished_at: required unless outcome is 'running'")
    found += _text_problems(run)
    found += _number_problems(run)
    workers = run.get("workers")
    if workers is not None and (
        isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= 100_000
    ):
        found.append(f"workers: {workers!r} is not a whole number from 1 to 100000")
    return found + _time_problems(run, now)


def _text_problems(run: dict[str, Any]) -> list[str]:
    found = []
    pipeline = run.get("pipeline")
    if pipeline is not None and not (isinstance(pipeline, str) and SLUG.match(pipeline)):
        found.append(f"pipeline: {pipeline!r} is not a slug (lowercase letters, digits, - _)")
    for name, longest in TEXT_LIMITS.items():
        value = run.get(name)
        if value is not None and (
            not isinstance(value, str) or len(value) > longest or CONTROL.search(value)
        ):
            found.append(f"{name}: must be text of at most {longest} characters, no controls")
    if run.get("outcome", "succeeded") not in OUTCOMES:
        found.append(f"outcome: {run.get('outcome')!r} is not one of {', '.join(OUTCOMES)}")
    if run.get("utilization_source") not in (None, *SOURCES):
        found.append(f"utilization_source: {run.get('utilization_source')!r} is not known")
    if not isinstance(run.get("tags", {}), dict) or len(run.get("tags", {})) > 50:
        found.append("tags: must be an object of at most 50 tags")
    interruptions = run.get("interruptions", [])
    if not isinstance(interruptions, list) or len(interruptions) > 1000:
        found.append("interruptions: must be a list of at most 1000")
    return found


def _number_problems(run: dict[str, Any]) -> list[str]:
    found = []
    for name in sorted(FLOAT_FIELDS):
        value = run.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            found.append(f"{name}: {value!r} is not a number")
        elif not math.isfinite(value):
            found.append(f"{name}: {value!r} is not a finite number")
        elif name == "gpu_utilization" and 1 < value <= 100:
            found.append(
                f"{name}: must be a fraction between 0 and 1; {value:g} looks like a "
                f"percentage: did you mean {value / 100:g}?"
            )
        elif not BOUNDS[name][0] <= value <= BOUNDS[name][1]:
            low, high = BOUNDS[name]
            found.append(f"{name}: {value:g} is not between {low:g} and {high:g}")
    return found


def _time(run: dict[str, Any], name: str, found: list[str]) -> datetime | None:
    value = run.get(name)
    if value is None:
        return None
    try:
        text = value[:-1] + "+00:00" if value.endswith(("Z", "z")) else value
        text = FRACTION.sub(_six_digits, text, count=1)
        parsed = datetime.fromisoformat(text)
        utc = parsed.astimezone(timezone.utc) if parsed.tzinfo else None
    except (AttributeError, TypeError, ValueError, OverflowError):
        utc = None
    if utc is None or not EARLIEST <= utc <= LATEST:
        found.append(f"{name}: {value!r} is not an ISO 8601 time with an offset, 1970 to 2200")
        return None
    return utc


def _time_problems(run: dict[str, Any], now: datetime) -> list[str]:
    found: list[str] = []
    start, end = _time(run, "started_at", found), _time(run, "finished_at", found)
    if start is not None and start > now + FUTURE_TOLERANCE:
        found.append(
            f"started_at: {run['started_at']} is more than 24 h after this machine's clock "
            f"({now.isoformat(timespec='seconds')}): check the year and the job's clock"
        )
    if start is None or end is None:
        return found
    if end <= start:
        found.append("finished_at: must be after started_at")
    elif end - start > LONGEST:
        found.append("finished_at: the run lasts more than a year")
    return found


def first_bad(records: Iterable[Record], now: datetime | None = None) -> str | None:
    """The first bad record (where, run id, reasons) and how many more there are, or
    None when every record passes; also a run_id given twice with other values."""
    return check_all(records, now)[0]


def check_all(records: Iterable[Record], now: datetime | None = None) -> tuple[str | None, int]:
    """:func:`first_bad` and the number of records, read once from an iterator: what
    is kept per run is two 8-byte digests (its pipeline and run_id, its values), so a
    file is checked in bounded memory whatever its size (~150 bytes a run)."""
    now = now or datetime.now(timezone.utc)
    seen: dict[int, int] = {}
    first, bad, count = "", 0, 0
    for record in records:
        count += 1
        found = problems(record.run, now)
        key = _digest((record.run.get("pipeline"), record.run.get("run_id")))
        values = _digest(record.run)
        if seen.setdefault(key, values) != values:
            found.append(
                f"run_id: {record.run.get('run_id')!r} comes twice in the file with different "
                "values"
            )
        if found:
            bad += 1
            first = first or f"{record.where} (run {record.run.get('run_id')}): {'; '.join(found)}"
    if not bad:
        return None, count
    more = bad - 1
    return first + (
        f" ({more} more bad run{'' if more == 1 else 's'} after it)" if more else ""
    ), count


def _digest(value: Any) -> int:
    """8 bytes of BLAKE2b over the value as canonical JSON (numbers as floats, so 8 and
    8.0 are the same, as they are equal in Python)."""
    text = json.dumps(_numbers(value), sort_keys=True, default=str, separators=(",", ":"))
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


def _numbers(value: Any) -> Any:
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, dict):
        return {str(k): _numbers(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_numbers(v) for v in value]
    return value
