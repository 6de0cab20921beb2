"""A refused request in a person's words, for the commands' stderr.

The server names each bad field by its place in the request body
(``runs.3.gpu_utilization``) and repeats those places in its message. A person reads
neither: they know the record (line 5 of their file, run ``r1`` of retraining
``nightly-42``) and the field as they wrote it (a CSV column, or ``--utilization``). So
each field becomes one line, naming the record, the field in the reader's terms, the
rule and the likely fix; the server's message is kept only when it says more than the
fields do (a conflict's "use a new run_id").
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Mapping
from typing import Any

from cadence_client.errors import AuthError, CadenceAPIError, ConflictError

# "runs.3.gpu_utilization" -> ("runs", "3", "gpu_utilization"); "evaluations.0" too.
ITEM_PATH = re.compile(r"^(\w+)\.(\d+)(?:\.(.+))?$")
# Reasons that read on from the field's name ("workers must be at least 1"); any other
# reason follows a colon ("pipeline: no such pipeline").
READS_ON = ("must ", "is ", "needs ", "has ")
RecordName = Callable[[int], "str | None"]


def refusal_kind(exc: CadenceAPIError) -> str:
    """How the first line names the refusal: what the person must do differs."""
    if isinstance(exc, AuthError):
        return "not allowed"
    return "conflict" if isinstance(exc, ConflictError) else "refused"


def refusal_lines(
    exc: CadenceAPIError,
    record: RecordName | None = None,
    terms: Mapping[str, str] | None = None,
) -> list[str]:
    """The lines to print for ``exc``: a first line, then one line per refused field.

    ``record(i)`` names item ``i`` of the request as the person knows it (``None``: "run
    4", counted from 1); ``terms`` maps a field to the person's word for it (a flag).
    Example: ``runs.0.gpu_utilization`` refused for 1.5 in ``runs.json`` ->
    ``runs.json item 1 (run r1, retraining nightly-42): gpu_utilization must be a
    fraction between 0 and 1: 1.5 looks like a percentage; did you mean 0.015?``
    """
    head = f"{refusal_kind(exc)} ({exc.status} {exc.code})"
    lines = [field_line(item, record, terms or {}) for item in exc.fields]
    if not lines:
        return [f"{head}: {exc.message}"]
    if _repeats_fields(exc.message, exc.fields):
        count = f"{len(lines)} problem" + ("" if len(lines) == 1 else "s")
        return [f"{head}: {count}:", *("  " + line for line in lines)]
    return [f"{head}: {exc.message}", *("  " + line for line in lines)]


def print_refusal(
    exc: CadenceAPIError,
    record: RecordName | None = None,
    terms: Mapping[str, str] | None = None,
    lead: str = "",
) -> None:
    """:func:`refusal_lines` on stderr, the first after ``cadence:`` and ``lead``."""
    first, *rest = refusal_lines(exc, record, terms)
    print(f"cadence: {lead}{first}", file=sys.stderr)
    for line in rest:
        print(line, file=sys.stderr)


def field_line(item: Mapping[str, Any], record: RecordName | None, terms: Mapping[str, str]) -> str:
    """One refused field: ``<record>: <field> <reason>``."""
    name, reason = str(item.get("field", "")), str(item.get("reason", ""))
    match = ITEM_PATH.match(name)
    if match is None:
        return _said(name, reason, terms) if name != "body" else reason
    collection, index, rest = match.group(1), int(match.group(2)), match.group(3)
    named = record(index) if record is not None else None
    who = named or f"{_singular(collection)} {index + 1}"
    if rest is None:
        return f"{who}: {reason}"
    return f"{who}: {_said(rest, reason, terms)}"


def _said(name: str, reason: str, terms: Mapping[str, str]) -> str:
    field = terms.get(name) or _inner_words(name)
    joint = " " if reason.startswith(READS_ON) else ": "
    return f"{field}{joint}{reason}"


def _inner_words(name: str) -> str:
    """A field inside a record: ``interruptions.0.resume_hours`` -> ``resume_hours of
    interruption 1``; a plain field is its own name."""
    match = ITEM_PATH.match(name)
    if match is None:
        return name
    where = f"{_singular(match.group(1))} {int(match.group(2)) + 1}"
    return f"{match.group(3)} of {where}" if match.group(3) else where


def _singular(collection: str) -> str:
    return collection[:-1] if collection.endswith("s") else collection


def _repeats_fields(message: str, fields: list[dict[str, Any]]) -> bool:
    """The message only lists the fields again (``invalid request: runs.0.workers: ...``)."""
    return any(str(f.get("field", "")) + ":" in message for f in fields)


def run_name(run: Mapping[str, Any], where: str = "") -> str:
    """How a person knows a run: where it is, its run_id and retraining, e.g.
    ``runs.csv line 5 (run r1, retraining nightly-42)``."""
    known = [f"run {run['run_id']}"] if run.get("run_id") else []
    if run.get("retraining_id") and run.get("retraining_id") != run.get("run_id"):
        known.append(f"retraining {run['retraining_id']}")
    if not where and known:
        where, known = known[0], known[1:]
    return f"{where} ({', '.join(known)})" if known else (where or "the run")
