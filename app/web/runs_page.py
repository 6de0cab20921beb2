"""A run's own page (every field, interruptions, tags, the cost's working) and a
side-by-side comparison of two runs. Both read the API's ``RunOut``, so the page shows
exactly what ``GET /api/v1/runs/{id}`` returns."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import HTMLResponse
from sqlalchemy.orm import Session

from app.deps import DatabaseDep, Viewer
from app.measurements import service as measurements
from app.pipelines.service import get_by_name
from app.planning.utilization_readings import Change, Reading, disagreement, readings
from app.runs import service
from app.runs.schemas import RunOut
from app.templating import templates

router = APIRouter(include_in_schema=False)
RunId = Annotated[int, Path(ge=1, le=2**63 - 1, description="The run's id")]
CompareId = Annotated[int, Query(ge=1, le=2**63 - 1)]
# The fields in the order a reader wants them; every other field of RunOut follows.
FIELDS: tuple[tuple[str, str], ...] = (
    ("pipeline", "Pipeline"),
    ("run_id", "Run id"),
    ("variant", "Variant"),
    ("started_at", "Started (UTC)"),
    ("finished_at", "Finished (UTC)"),
    ("outcome", "Outcome"),
    ("retraining_id", "Retraining"),
    ("wall_clock_hours", "Wall clock (h)"),
    ("workers", "Workers (GPUs)"),
    ("gpu_type", "GPU type"),
    ("gpu_hours", "GPU-hours billed"),
    ("gpu_utilization", "GPU utilization"),
    ("mfu", "MFU"),
    ("idle_gpu_hours", "Idle GPU-hours"),
    ("data_stall_hours", "Data stalls (h)"),
    ("checkpoint_hours", "Blocking checkpoint writes (h)"),
    ("scheduling_wait_hours", "Queue wait before start (h)"),
    ("price_per_gpu_hour", "Price recorded on the run (USD/GPU-h)"),
    ("effective_price_per_gpu_hour", "Price used (USD/GPU-h)"),
    ("cost_usd", "Cost (USD)"),
    ("quality_metric", "Quality metric"),
    ("quality_value", "Quality value"),
    ("created_at", "Reported at (UTC)"),
    ("id", "Cadence id"),
)


def rows(run: RunOut) -> list[tuple[str, str, Any]]:
    """(field, label, value) for every scalar field of the run."""
    data = run.model_dump()
    return [(f, label, data[f]) for f, label in FIELDS]


def cost_working(run: RunOut) -> str:
    """The cost as arithmetic a reader can check: GPU-hours x price = cost."""
    if run.outcome == "running":
        return (
            "Still running: its GPU-hours and cost are known when it finishes (this month's "
            "spend counts it at workers × hours so far × price)."
        )
    return (
        f"{run.gpu_hours:,.2f} GPU-hours × ${run.effective_price_per_gpu_hour:,.2f} per "
        f"GPU-hour = ${run.cost_usd:,.2f}"
    )


def descriptions_of(session: Session, run: RunOut) -> dict[str, str]:
    """The run's pipeline's variant descriptions (``candidate``: what it is)."""
    return get_by_name(session, run.pipeline).variant_descriptions or {}


def utilization_readings(session: Session, run: RunOut) -> list[Reading]:
    """Each utilization the run has had (as ingested, then each enrichment), from its
    measurement audit: where the value came from and how much of the run it covers."""
    audit = measurements.changes(session, run.pipeline, run.run_id).changes
    changes = [Change(c.field, c.old_value, c.new_value, c.changed_at, c.changed_by) for c in audit]
    return readings(run.gpu_utilization, run.utilization_source, changes)


@router.get("/runs/compare", response_class=HTMLResponse)
def compare_runs(
    request: Request, db: DatabaseDep, viewer: Viewer, a: CompareId, b: CompareId
) -> HTMLResponse:
    with db.read() as session:
        left, right = service.get(session, a, viewer), service.get(session, b, viewer)
        described = (descriptions_of(session, left), descriptions_of(session, right))
    pairs = [
        (label, x, y, x != y)
        for (_, label, x), (_, _, y) in zip(rows(left), rows(right), strict=True)
    ]
    return templates.TemplateResponse(
        request,
        "run_compare.html",
        {
            "a": left,
            "b": right,
            "pairs": pairs,
            "described": described,
            "working": (cost_working(left), cost_working(right)),
        },
    )


@router.get("/runs/{pk}", response_class=HTMLResponse)
def run_page(request: Request, pk: RunId, db: DatabaseDep, viewer: Viewer) -> HTMLResponse:
    with db.read() as session:
        run = service.get(session, pk, viewer)
        descriptions = descriptions_of(session, run)
        found = utilization_readings(session, run)
    return templates.TemplateResponse(
        request,
        "run.html",
        {
            "run": run,
            "rows": rows(run),
            "working": cost_working(run),
            "descriptions": descriptions,
            "readings": found,
            "disagreement": disagreement(found),
        },
    )
