"""The organisation's prior, one for every request (docs/methodology.md 5.8).

What a small window borrows (``app.planning.org_prior``) is computed from every
pipeline's production window, whatever page asks: the pipeline page, the gate, the
projection API, the portfolio of one team and the alerts all read :func:`org_prior`, so
an answer never depends on what was read before it.

It is kept between requests under what it is made from: every pipeline's id,
production variant, price and that variant's change counter (read once per read session,
the counters the portfolio reads too). A request whose key is unchanged reads two small
statements and no window; after a new run, one window is read again and one window's
part recomputed (each is kept by its series), and the 5,000 parts are combined (~5 ms).
A write session (the alerts after an ingest) looks up what read sessions kept and
stores nothing (``app.db.memo.kept_view``).
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy.orm import Session

from app.analytics import costs
from app.db import rollup_reads
from app.db.cost_reads import Series
from app.db.memo import kept, kept_view
from app.planning.cost_series import FIXED_PRIOR, OrgPrior, days_of
from app.planning.org_prior import WindowStats, combine, rounded, window_stats
from app.planning.scenario import RUN_WINDOW

__all__ = ["columns", "org_prior", "prior_of"]

PRIOR = "org_prior"  # the kept prior, under its key
PARTS = "org_prior_parts"  # each window's part, under its series


def org_prior(session: Session) -> OrgPrior:
    """The organisation's prior from every pipeline's production window (the fixed prior
    while fewer than two pipelines have runs)."""
    listed = rollup_reads.costings(session)
    counters = rollup_reads.change_counters(session).by_variant
    key = (tuple(listed), tuple(counters.get((p.id, p.production_variant)) for p in listed))
    found = kept_view(session, PRIOR).get("org")
    if found is not None and found[0] == key:
        prior: OrgPrior = found[1]
        return prior
    prior = prior_of(session, list(costs.windows(session, listed, RUN_WINDOW).values()))
    kept(session, PRIOR)["org"] = (key, prior)
    return prior


def prior_of(session: Session, series: Sequence[Series]) -> OrgPrior:
    """The prior of these windows (two or more non-empty; else the fixed prior). Each
    window's part is kept by its series (a new run recomputes one window's, not 5,000),
    and the prior is rounded so that the small moves one window makes do not
    re-forecast every pipeline."""
    usable = [s for s in series if s]
    if len(usable) < 2:
        return FIXED_PRIOR
    seen = kept_view(session, PARTS)
    # One part per pipeline, two pipelines with the same series counting twice.
    stats = [seen.get(s) or window_stats(*columns(s)) for s in usable]
    parts: dict[Series, WindowStats] = kept(session, PARTS)
    parts.clear()
    parts.update(zip(usable, stats, strict=True))
    return rounded(combine(stats))


def columns(series: Series) -> tuple[list[float], list[float], list[float]]:
    """A cost series as columns: costs, extra attempts' costs, start days."""
    costs_, extras, starts = zip(*series, strict=True)
    return list(costs_), list(extras), days_of(starts).tolist()
