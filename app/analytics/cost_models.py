"""Each pipeline's cost model (app/planning/cost_series.py ``fit``), kept between
requests: the month to date (``app.analytics.month``) and today's expected bill
(``app.analytics.bill_now``) both price retrainings with it, so an org-wide read fits
each window once (~1 ms of its change-point search and trend), not once per figure.

Kept in the map ``cost_models`` by (pipeline id, window) while the series, its declared
changes and the organisation's prior are equal: the series is the kept inputs' own
tuple, so a warm request compares it by identity and fits nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sqlalchemy.orm import Session

from app.analytics.prior import columns
from app.db.cost_reads import Series
from app.db.kept import KeptMap
from app.planning.cost_series import CostModel, OrgPrior, fit

Declared = tuple[tuple[float, str], ...]
Slot = tuple[int, int]  # pipeline id, window
KEPT_MODELS: KeptMap[Slot, CostModel] = KeptMap("cost_models")


def model_of(series: Series, declared: Sequence[tuple[float, str]], prior: OrgPrior) -> CostModel:
    """The cost model of a non-empty series."""
    return fit(*columns(series), declared, prior)


def cost_models(
    session: Session, wanted: Mapping[Slot, tuple[Series, Declared, OrgPrior]]
) -> dict[Slot, CostModel]:
    """The model of each slot's (series, declared changes, prior), those kept reused."""

    def make(slots: list[Slot]) -> dict[Slot, CostModel]:
        return {s: model_of(*wanted[s]) for s in slots}

    return KEPT_MODELS.get_many(session, wanted.items(), make)
