"""GET /api/v1/pipelines/{name}/cadence. Scenario parameters are parsed as the other
planning endpoints parse them (app/analytics/router.py), so one scenario object can
replace them all."""

from __future__ import annotations

from fastapi import APIRouter

from app.analytics.missing import answered
from app.analytics.router import Variant
from app.analytics.scenario import ScenarioDep
from app.cadence import service
from app.cadence.schemas import CadenceOut
from app.deps import DatabaseDep, ReadablePipeline

router = APIRouter(prefix="/api/v1", tags=["planning"])


@router.get("/pipelines/{name}/cadence", response_model=CadenceOut)
def get_cadence(
    name: ReadablePipeline,
    db: DatabaseDep,
    p: ScenarioDep,
    variant: Variant = None,
) -> CadenceOut:
    """The cost-optimal retraining cadence: retraining spend plus the value lost to a
    stale model, over cadences from monthly to daily (methodology.md §11), and with
    ``cadence`` what that cadence buys against today's."""
    scenario = service.Scenario(p.what_if(), p.convention, p.budget, variant, p.cadence)
    with db.read() as session:
        return answered(service.cadence_of(session, name, scenario))
