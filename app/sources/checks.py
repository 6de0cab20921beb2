"""Every record of an import checked before the first one is posted, with the server's
own rules, so that an import is refused whole instead of stopping part-way.

The server stores a batch all or nothing, but an import of 1,200 records is three
batches: a record the server refuses in the third left the first two stored. Each
payload is checked here as the server checks it (``RunIn``, the rules between fields,
the future-start limit at its default; a server configured stricter can still refuse,
and the importer then says exactly what was stored). Memory: counts and the first bad
record's message, never the records (the sources' run ids are unique by construction:
a job id and its start, a Job's uid).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from app.runs.schemas import RunIn
from app.runs.validation import cross_field_errors, future_start_error

# The server's default CADENCE_RUN_FUTURE_TOLERANCE_HOURS (app/settings.py).
FUTURE_TOLERANCE_HOURS = 24.0


def problems(payload: dict[str, Any], now: datetime) -> list[str]:
    """``field: reason`` for each rule the server would refuse the payload for."""
    try:
        run = RunIn.model_validate(payload)
    except ValidationError as exc:
        return [
            f"{'.'.join(str(p) for p in error['loc']) or 'run'}: {error['msg']}"
            for error in exc.errors(include_url=False)
        ]
    found = cross_field_errors(run)
    future = future_start_error(run, now, FUTURE_TOLERANCE_HOURS)
    if future is not None:  # checked here against this machine's clock
        found.append((future[0], future[1].replace("the server's clock", "this machine's clock")))
    return [f"{name}: {reason}" for name, reason in found]


@dataclass
class Check:
    """What the check of a whole input found: counts, and the first bad record."""

    read: int = 0
    ready: int = 0
    skipped: int = 0
    bad: int = 0
    first_bad: str = ""  # "job 4242 (train): started_at: ... "
    now: datetime = field(default_factory=lambda: datetime.now(UTC))

    def add(self, source: str, payload: dict[str, Any] | None, reason: str, invalid: bool) -> None:
        """Count one record; ``reason`` without ``payload``: nothing is stored from it
        (``invalid``: because a value is wrong, which refuses the whole input)."""
        self.read += 1
        if payload is None:
            self.skipped += 0 if invalid else 1
            found = [reason] if invalid else []
        else:
            found = problems(payload, self.now)
        if found:
            self.bad += 1
            self.first_bad = self.first_bad or f"{source}: {'; '.join(found)}"
        elif payload is not None:
            self.ready += 1

    def refusal(self) -> str:
        more = f" ({self.bad - 1} more bad records after it)" if self.bad > 1 else ""
        return (
            f"{self.first_bad}{more}. Nothing was stored: the whole input of {self.read} "
            "records is refused; fix the record(s) and run the import again"
        )
