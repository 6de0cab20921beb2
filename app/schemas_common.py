"""Field types shared by the API schemas."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

SLUG_RE = re.compile(r"^[a-z0-9](?:[a-z0-9_-]{0,61}[a-z0-9])?$")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def _no_control(value: str) -> str:
    if _CONTROL.search(value):
        raise ValueError("must not contain NUL or other control characters")
    return value


def _slug(value: str) -> str:
    if not SLUG_RE.match(value):
        raise ValueError(
            "must be a slug: 1-63 lowercase letters, digits, '-' or '_', "
            "starting and ending with a letter or digit (e.g. 'recsys-ranker')"
        )
    return value


def slug_or_422(value: str, field: str) -> str:
    """Check a slug that arrived outside a request body (a path or a CLI flag)."""
    from app.errors import Invalid

    try:
        return _slug(value)
    except ValueError as exc:
        raise Invalid(f"{field}: {exc}", fields=[{"field": field, "reason": str(exc)}]) from exc


Slug = Annotated[str, AfterValidator(_slug)]
Text = Annotated[str, AfterValidator(_no_control)]


class StrictModel(BaseModel):
    """Request bodies: unknown fields (typos) and NaN/Infinity are refused."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class OutModel(BaseModel):
    model_config = ConfigDict(from_attributes=True)


NonNegative = Annotated[float, Field(ge=0, le=1e6)]
Fraction = Annotated[float, Field(ge=0, le=1)]
