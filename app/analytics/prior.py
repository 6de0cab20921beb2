"""The organisation's prior, one for every request (docs/methodology.md 5.8).

What a small window borrows (``app.planning.org_prior``) is computed from every
pipeline's production window, whatever page asks: the pipeline page, the gate, the
projection API, the portfolio of one team and the alerts all read :func:`org_prior`, so
an answer never depends on what was read before it.

It is kept between requests under a stamp of what it is made from: every pipeline's id,
production variant and price, and the sum of the production variants' change counters,
read in one statement (``rollup_reads.prior_stamp``, once per read session). A request
whose stamp is unchanged reads that one row and no window; after a new run, one window
is read again and one window's part recomputed (each is kept by its series), and the
5,000 parts are combined (~5 ms).
A write session (the alerts after an ingest) looks up what read sessions kept and
stores nothing (``app.db.kept``).
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.orm import Session

from app.analytics import costs
from app.db import rollup_reads
from app.db.cost_reads import Series
from app.db.kept import KeptMap
from app.planning.cost_series import FIXED_PRIOR, OrgPrior, days_of
from app.planning.org_prior import WindowStats, combine, rounded, window_stats
from app.planning.scenario import RUN_WINDOW

__all__ = ["columns", "org_prior", "prior_of"]

# The prior, in one slot, while every pipeline's id, production variant, price and
# change counter are as read; each window's part under its series (pure of it).
KEPT_PRIOR: KeptMap[str, OrgPrior] = KeptMap("org_prior")
KEPT_PARTS: KeptMap[Series, WindowStats] = KeptMap("org_prior_parts")


def org_prior(session: Session) -> OrgPrior:
    """The organisation's prior from every pipeline's production window (the fixed prior
    while fewer than two pipelines have runs)."""

    def make() -> OrgPrior:
        listed = rollup_reads.costings(session)
        return prior_of(session, list(costs.windows(session, listed, RUN_WINDOW).values()))

    return KEPT_PRIOR.get(session, ("org", rollup_reads.prior_stamp(session)), make)


def prior_of(session: Session, series: Sequence[Series]) -> OrgPrior:
    """The prior of these windows (two or more non-empty; else the fixed prior). Each
    window's part is kept by its series (a new run recomputes one window's, not 5,000),
    and the prior is rounded so that the small moves one window makes do not
    re-forecast every pipeline."""
    usable = [s for s in series if s]
    if len(usable) < 2:
        return FIXED_PRIOR
    parts = KEPT_PARTS.get_many(
        session,
        ((s, None) for s in usable),
        lambda new: {s: window_stats(*columns(s)) for s in new},
    )
    # One part per pipeline, two pipelines with the same series counting twice.
    return rounded(combine([parts[s] for s in usable]))


def columns(series: Series) -> tuple[list[float], list[float], list[float]]:
    """A cost series as columns: costs, extra attempts' costs, start days."""
    costs_, extras, starts = zip(*series, strict=True)
    return list(costs_), list(extras), days_of(starts).tolist()
