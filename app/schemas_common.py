"""Field types shared by the API schemas, and the one check every identifier passes."""

from __future__ import annotations

import re
import unicodedata
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    ValidatorFunctionWrapHandler,
    WrapValidator,
)
from pydantic_core import PydanticCustomError

from app.exceptions import Invalid
from app.planning.cost_basis import RENAMED

SLUG_RE = re.compile(r"^[a-z0-9](?:[a-z0-9_-]{0,61}[a-z0-9])?$")


def _slug(value: str) -> str:
    if not SLUG_RE.match(value):
        raise ValueError(SLUG_REASON)
    return value


def slug_or_422(value: str, field: str) -> str:
    """Check a slug that arrived outside a request body (a path or a CLI flag)."""
    try:
        return _slug(value)
    except ValueError as exc:
        raise Invalid(f"{field}: {exc}", fields=[{"field": field, "reason": str(exc)}]) from exc


# Checked by pydantic-core's regex engine, not by Python callbacks: a 1000-run batch has
# ~6000 strings, and per-string Python validators were ~12% of its time (py-spy).
# Free text (tag values, causes, owners): no C0/C1 control characters but tab and newline.
CONTROL_CHARACTERS = r"\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f"
CONTROL_FREE_PATTERN = rf"^[^{CONTROL_CHARACTERS}]*$"

# Identifiers (run ids, variants, GPU types, metric names, tag keys, names): they are
# compared for retry safety and shown in lists, charts and alerts, so two that print
# the same must be the same string. Refused: every control character (tab and newline
# too), invisible format characters (bidi overrides and marks, zero-width spaces and
# joiners, soft hyphen, BOM, tags: Unicode category Cf), line and paragraph separators,
# spaces other than U+0020, blank Hangul fillers, variation selectors and private use;
# and a space at either end. Written as code point ranges (not \p{Cf}) so that the
# OpenAPI pattern also works for clients and fuzzers using other regex engines.
INVISIBLE_CHARACTERS = (
    r"\x00-\x1f\x7f-\xa0\u00ad\u034f\u061c\u115f\u1160\u1680\u180b-\u180f\u2000-\u200f"
    r"\u2028-\u202f\u205f-\u206f\u3000\u3164\ue000-\uf8ff\ufe00-\ufe0f\ufeff\uffa0"
    r"\ufff0-\ufffb\U000110bd\U000110cd\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    r"\U000e0000-\U000e0fff\U000f0000-\U0010ffff"
)
_ID_CHAR = rf"[^{INVISIBLE_CHARACTERS}]"
_ID_END = rf"[^{INVISIBLE_CHARACTERS} ]"
IDENTIFIER_PATTERN = rf"^(?:{_ID_END}(?:{_ID_CHAR}*{_ID_END})?)?$"
IDENTIFIER_RE = re.compile(IDENTIFIER_PATTERN)

SLUG_PATTERN = SLUG_RE.pattern
SLUG_REASON = (
    "must be a slug: 1-63 lowercase letters, digits, '-' or '_', "
    "starting and ending with a letter or digit (e.g. 'recsys-ranker')"
)
CONTROL_REASON = "must not contain NUL or other control characters"
IDENTIFIER_REASON = (
    "must be printable text: no control characters (tab and newline included), no "
    "invisible or direction-changing characters (zero-width, bidi), no spaces at either end"
)
PATTERN_REASONS = {
    SLUG_PATTERN: SLUG_REASON,
    CONTROL_FREE_PATTERN: CONTROL_REASON,
    IDENTIFIER_PATTERN: IDENTIFIER_REASON,
}


def nfc(value: str) -> str:
    """One spelling per identifier: 'é' as one code point or as e + accent is the same
    id (NFC). ASCII, the usual case, is already normalised and returned as it is."""
    return value if value.isascii() else unicodedata.normalize("NFC", value)


def identifier_error(value: str) -> str | None:
    """Why ``value`` is not an acceptable identifier (for input outside pydantic: CLI
    flags, path and query values), or None."""
    return None if IDENTIFIER_RE.match(value) else IDENTIFIER_REASON


Slug = Annotated[str, StringConstraints(pattern=SLUG_PATTERN)]
Text = Annotated[str, StringConstraints(pattern=CONTROL_FREE_PATTERN)]
Identifier = Annotated[str, StringConstraints(pattern=IDENTIFIER_PATTERN), AfterValidator(nfc)]

# Timestamps: stored and computed on in UTC, so the range is checked after conversion.
# A year-10000 or year-0 instant fits in an offset timestamp (9999-12-31T23:00-01:00)
# but not in Python's datetime once in UTC, nor in week arithmetic: stored, it broke
# every later read. Years 1970..2200 hold every real run with a wide margin.
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(2200, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)
RANGE_REASON = "must be between 1970-01-01 and 2200-12-31 (UTC)"
FORMAT_REASON = "must be an ISO 8601 timestamp with a UTC offset, e.g. 2026-11-02T08:00:00+00:00"
# Dates written out: a number (epoch seconds? milliseconds?) or "1700000000" is refused.
ISO_START = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}")


def in_range_utc(value: datetime) -> datetime | None:
    """``value`` in UTC if it lies in EARLIEST..LATEST, else None (never raises)."""
    try:
        utc = value.astimezone(UTC)
    except (OverflowError, ValueError):  # year 0 or 10000 once in UTC
        return None
    return utc if EARLIEST <= utc <= LATEST else None


def _timestamp(value: Any, handler: ValidatorFunctionWrapHandler) -> datetime:
    if isinstance(value, str):
        if not ISO_START.match(value):
            raise PydanticCustomError("timestamp_format", FORMAT_REASON)
    elif not isinstance(value, datetime):
        raise PydanticCustomError("timestamp_format", FORMAT_REASON)
    parsed: datetime = handler(value)
    utc = in_range_utc(parsed)
    if utc is None:
        raise PydanticCustomError("timestamp_range", RANGE_REASON)
    return utc


# Not strict (strict JSON-less validation refuses ISO strings); _timestamp is the check.
Timestamp = Annotated[AwareDatetime, Field(strict=False), WrapValidator(_timestamp)]


class StrictModel(BaseModel):
    """Request bodies: unknown fields (typos) and NaN/Infinity are refused, and JSON types
    are strict: ``true`` or ``"8"`` is not a number of workers (``strict``)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)


class OutModel(BaseModel):
    model_config = ConfigDict(from_attributes=True)


# Below any clock's or bill's resolution (3.6 microseconds, a billionth of a dollar).
TINY = 1e-9


def snap_tiny(value: float) -> float:
    """A measurement this close to zero is stored as zero. The SQL sums multiply several
    of them, and PostgreSQL raises "value out of range: underflow" where a product of
    two nonzero numbers rounds to 0 (e.g. a 1e-310 h stall times a 1e-16 idle share):
    that would make the run's delete and weekly reads fail. Zero changes no figure."""
    return 0.0 if -TINY < value < TINY else value


NonNegative = Annotated[float, Field(ge=0, le=1e6), AfterValidator(snap_tiny)]
Fraction = Annotated[float, Field(ge=0, le=1), AfterValidator(snap_tiny)]


def _renamed_basis(value: Any) -> Any:
    if value == "median":
        raise ValueError(RENAMED)
    return value


CostBasisIn = Annotated[Literal["expected_bill", "p90"], BeforeValidator(_renamed_basis)]
"""A cost basis as a request gives it (app/planning/cost_basis.py); the old word
``median`` is a 422 that names its new one."""
