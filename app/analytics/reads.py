"""What the pages read beside the planning answers: variants and recent runs."""

from __future__ import annotations

from sqlalchemy.orm import Session

from app.analytics import repository as repo
from app.analytics.repository import RunRow
from app.db.models import Pipeline

__all__ = ["RunRow", "recent_runs", "variant_names"]


def variant_names(session: Session, pipeline: Pipeline) -> list[str]:
    """The pipeline's variants, most-run first."""
    return [v.variant for v in repo.variants(session, pipeline.id)]


def recent_runs(
    session: Session, pipeline: Pipeline, *, limit: int, variant: str | None = None
) -> list[RunRow]:
    """The latest ``limit`` runs (of one variant, if given), oldest first."""
    if variant is None:  # the same arguments as the services' calls: one memoised read
        return repo.recent_runs(session, pipeline.id, limit=limit)
    return repo.recent_runs(session, pipeline.id, variant=variant, limit=limit)
