"""Field types shared by the API schemas."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from app.exceptions import Invalid

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
CONTROL_FREE_PATTERN = r"^[^\x00-\x08\x0b\x0c\x0e-\x1f\x7f]*$"
SLUG_PATTERN = SLUG_RE.pattern
SLUG_REASON = (
    "must be a slug: 1-63 lowercase letters, digits, '-' or '_', "
    "starting and ending with a letter or digit (e.g. 'recsys-ranker')"
)
CONTROL_REASON = "must not contain NUL or other control characters"
PATTERN_REASONS = {SLUG_PATTERN: SLUG_REASON, CONTROL_FREE_PATTERN: CONTROL_REASON}

Slug = Annotated[str, StringConstraints(pattern=SLUG_PATTERN)]
Text = Annotated[str, StringConstraints(pattern=CONTROL_FREE_PATTERN)]


class StrictModel(BaseModel):
    """Request bodies: unknown fields (typos) and NaN/Infinity are refused."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class OutModel(BaseModel):
    model_config = ConfigDict(from_attributes=True)


NonNegative = Annotated[float, Field(ge=0, le=1e6)]
Fraction = Annotated[float, Field(ge=0, le=1)]
