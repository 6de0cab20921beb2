"""The bill reconciled with the runs: a pipeline's month, every pipeline's month (JSON
and CSV)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response

from app.auth.service import visible_pipelines
from app.billing import service
from app.billing.schemas import OrgReconciliationOut, ReconciliationOut
from app.deps import DatabaseDep, ReadablePipeline, Viewer

router = APIRouter(prefix="/api/v1", tags=["reconciliation"])
Month = Annotated[
    str | None,
    Query(max_length=7, description="YYYY-MM (UTC); default: the newest billed month"),
]


@router.get("/pipelines/{name}/reconciliation", response_model=ReconciliationOut)
def pipeline_reconciliation(
    name: ReadablePipeline, db: DatabaseDep, month: Month = None
) -> ReconciliationOut:
    """The pipeline's GPU spend on the imported cloud bill in a month (`cadence import
    focus`): billed (EffectiveCost), the part its runs explain (the hours they held the
    resources their `cloud_resource_id` tag names), the rest unexplained, and the
    bill's effective price per GPU-hour beside the pipeline's price setting."""
    with db.read() as session:
        return service.pipeline_reconciliation(session, name, month)


@router.get("/reconciliation", response_model=OrgReconciliationOut)
def reconciliation(db: DatabaseDep, viewer: Viewer, month: Month = None) -> OrgReconciliationOut:
    """Every pipeline's figures for the month, the GPU lines no pipeline explains
    (untagged instances) and the total."""
    with db.read() as session:
        return service.org_reconciliation(session, month, visible_pipelines(viewer))


@router.get("/reconciliation.csv", response_class=Response)
def reconciliation_csv(db: DatabaseDep, viewer: Viewer, month: Month = None) -> Response:
    """The same figures as CSV, one row per pipeline, then unattributed and total."""
    with db.read() as session:
        answer = service.org_reconciliation(session, month, visible_pipelines(viewer))
    return Response(
        service.org_csv(answer),
        media_type="text/csv",
        headers={
            "Content-Disposition": f'attachment; filename="reconciliation-{answer.month}.csv"'
        },
    )
