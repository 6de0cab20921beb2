"""``NotEnoughData``: what a planning answer is when what it needs is not there yet (no
runs of a variant, too few evaluations, no budget, no value set). A value, not an
exception: a page shows its reason in place of the section; an API router turns it into
the 422 that names the field (:func:`answered`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

from app.exceptions import Invalid

T = TypeVar("T")


@dataclass(frozen=True)
class NotEnoughData:
    field: str  # the API parameter or setting the reason is about
    reason: str

    @property
    def message(self) -> str:
        return f"{self.field}: {self.reason}"

    def error(self) -> Invalid:
        return Invalid(self.message, fields=[{"field": self.field, "reason": self.reason}])


def answered(result: T | NotEnoughData) -> T:
    """The answer, or the 422 an API client gets when it cannot be computed yet."""
    if isinstance(result, NotEnoughData):
        raise result.error()
    return result
