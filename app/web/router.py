"""Server-rendered pages. Figures arrive finished (pure builders); templates only embed them."""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, StreamingResponse

from app.alerts.service import page_section as alerts_section
from app.analytics.scenario import ScenarioDep
from app.auth.service import visible_pipelines
from app.db.models import Pipeline
from app.deps import DatabaseDep, ReadablePipeline, Viewer
from app.exceptions import Invalid, NotFound
from app.pipelines import service as pipelines
from app.pipelines.service import get_by_name
from app.planning.scenario import Scenario
from app.planning.weekly import iso_week, week_monday
from app.runs import listing
from app.schemas_common import EARLIEST, LATEST, RANGE_REASON
from app.templating import VENDOR_FILES, templates
from app.web import views
from app.web.figures import to_json
from app.web.value_view import value_section

router = APIRouter(include_in_schema=False)
OVERVIEW_PAGE = 24
REVIEW_PAGE = 100
SCENARIO_KEYS = (
    "cadence",
    "utilization_target",
    "price",
    "workers",
    "failure_rate",
    "checkpoint_interval_hours",
    "weeks_per_month",
    "budget",
)


def gate_params(
    baseline: Annotated[str, Query(min_length=1, max_length=64)] = "baseline",
    candidate: Annotated[str, Query(min_length=1, max_length=64)] = "candidate",
    min_uplift: Annotated[float, Query(ge=0, le=100)] = 10.0,
    margin: Annotated[float, Query(ge=0, le=1e6)] = 0.01,
    alpha: Annotated[float, Query(gt=0, lt=0.5)] = 0.05,
) -> views.GateParams:
    return views.GateParams(baseline, candidate, min_uplift, margin, alpha)


GateDep = Annotated[views.GateParams, Depends(gate_params)]


@router.get("/", response_class=HTMLResponse)
def overview(
    request: Request,
    db: DatabaseDep,
    viewer: Viewer,
    page: Annotated[int, Query(ge=1, le=10_000)] = 1,
) -> HTMLResponse:
    today = datetime.now(UTC).date()
    only = visible_pipelines(viewer)
    with db.read() as session:
        total = pipelines.count(session, only=only)
        shown = pipelines.page(
            session, offset=(page - 1) * OVERVIEW_PAGE, limit=OVERVIEW_PAGE, only=only
        )
        cards = views.cards(session, shown, today)
    return templates.TemplateResponse(
        request,
        "overview.html",
        {
            "cards": cards,
            "page": page,
            "pages": max(1, -(-total // OVERVIEW_PAGE)),
            "week": iso_week(today),
            "to_json": to_json,
        },
    )


@router.get("/pipelines/{name}", response_class=HTMLResponse)
def pipeline_page(
    request: Request,
    name: ReadablePipeline,
    db: DatabaseDep,
    p: ScenarioDep,
    g: GateDep,
    sort: Annotated[str, Query(pattern="^(" + "|".join(listing.SORTS) + ")$")] = "started_at",
    order: Annotated[str, Query(pattern="^(asc|desc)$")] = "desc",
    page: Annotated[int, Query(ge=1, le=100_000)] = 1,
    size: Annotated[int, Query(ge=1, le=100)] = 25,
) -> HTMLResponse:
    with db.read() as session:
        pipeline = get_by_name(session, name)
        context = _whatif_context(session, pipeline, p, g, dict(request.query_params))
        summaries, trend_warnings = views.weekly(session, pipeline)
        scaling, scaling_out = views.scaling_section(session, pipeline, p)
        runs, total = listing.table_page(
            session, pipeline.id, sort=sort, descending=order == "desc", number=page, size=size
        )
        context.update(
            {
                "trend": views.trend_sections(summaries),
                "weeks": summaries,
                "trend_warnings": trend_warnings,
                "runs_charts": views.run_sections(session, pipeline),
                "scaling": scaling,
                "scaling_out": scaling_out,
                "runs": runs,
                "total_runs": total,
                "sort": sort,
                "order": order,
                "page": page,
                "size": size,
                "pages": max(1, -(-total // size)),
                "observed_utilization": views.observed_utilization(session, pipeline),
                "alerts": alerts_section(session, pipeline),
                "value": value_section(session, pipeline, p),
            }
        )
    return templates.TemplateResponse(request, "pipeline.html", context)


def _whatif_context(
    session: Any, pipeline: Pipeline, p: Scenario, g: views.GateParams, query: dict[str, str]
) -> dict[str, Any]:
    """Every figure that depends on the scenario, the gate included: one re-render
    keeps the cost cards, levers, checkpoints and the gate on the same scenario."""
    cost, projection = views.projection_section(session, pipeline, p)
    gate, gate_empty = views.gate_section(session, pipeline, g, p)
    levers, levers_empty = views.levers_section(session, pipeline, p)
    checkpoint, checkpoint_out = views.checkpoint_section(session, pipeline, p)
    return {
        "pipeline": pipeline,
        "p": p,
        "target": p.target(pipeline.runs_per_week),
        "cost": cost,
        "headline": views.headline(projection),
        "projection": projection,
        "levers": levers,
        "levers_empty": levers_empty,
        "checkpoint": checkpoint,
        "checkpoint_out": checkpoint_out,
        "to_json": to_json,
        "gate": gate,
        "gate_empty": gate_empty,
        "g": g,
        "query": query,
        "variants": views.variant_names(session, pipeline),
        "whatif_keys": SCENARIO_KEYS,
    }


@router.get("/pipelines/{name}/whatif")
def whatif_fragment(
    request: Request,
    name: ReadablePipeline,
    db: DatabaseDep,
    p: ScenarioDep,
    g: GateDep,
) -> JSONResponse:
    """The scenario's sections (gate included), re-rendered: finished figures plus
    server-escaped HTML."""
    with db.read() as session:
        pipeline = get_by_name(session, name)
        context = _whatif_context(session, pipeline, p, g, dict(request.query_params))
    env = templates.env
    html = env.get_template("_whatif.html").render(request=request, **context)
    return JSONResponse(
        {
            "html": html,
            "figures": {"cost": context["cost"].figure, "checkpoint": context["checkpoint"].figure},
        }
    )


@router.get("/pipelines/{name}/runs.csv")
def runs_csv(name: ReadablePipeline, db: DatabaseDep) -> StreamingResponse:
    with db.read() as session:
        pipeline_id = get_by_name(session, name).id
    filename = f"cadence-{name}-runs.csv"
    return StreamingResponse(
        listing.csv_rows(db, pipeline_id),
        media_type="text/csv",
        headers={"Content-Disposition": f'attachment; filename="{filename}"'},
    )


@router.get("/review", response_class=HTMLResponse)
def weekly_review(
    request: Request,
    db: DatabaseDep,
    viewer: Viewer,
    week: Annotated[str | None, Query(max_length=10)] = None,
    page: Annotated[int, Query(ge=1, le=100_000)] = 1,
) -> HTMLResponse:
    """Every pipeline the viewer may see, REVIEW_PAGE rows a page, with totals over all
    of them; all numbers from the rollups."""
    today = datetime.now(UTC).date()
    label = week or iso_week(today)
    try:
        monday = week_monday(label)
    except ValueError as exc:
        raise Invalid(
            str(exc), fields=[{"field": "week", "reason": "expected e.g. 2026-W45"}]
        ) from exc
    # The page also links the weeks either side and queries the week's runs.
    if not EARLIEST.year <= monday.isocalendar().year <= LATEST.year:
        raise Invalid(
            f"week: {label} {RANGE_REASON}", fields=[{"field": "week", "reason": RANGE_REASON}]
        )
    only = visible_pipelines(viewer)
    with db.read() as session:
        total = pipelines.count(session, only=only)
        listed = pipelines.page(
            session, offset=(page - 1) * REVIEW_PAGE, limit=REVIEW_PAGE, only=only
        )
        rows = views.review(session, listed, monday)
        this, last = views.review_totals(session, monday, only)
    return templates.TemplateResponse(
        request,
        "review.html",
        {
            "rows": rows,
            "week": label,
            "monday": monday,
            "total": total,
            "this": this,
            "last": last,
            "page": page,
            "size": REVIEW_PAGE,
            "pages": max(1, -(-total // REVIEW_PAGE)),
            "previous": iso_week(date.fromordinal(monday.toordinal() - 7)),
            "next": iso_week(date.fromordinal(monday.toordinal() + 7)),
        },
    )


@router.get("/help", response_class=HTMLResponse)
def help_page(request: Request) -> HTMLResponse:
    return templates.TemplateResponse(request, "help.html", {})


@router.get("/docs", response_class=HTMLResponse)
def api_docs(request: Request) -> HTMLResponse:
    """Swagger UI from the installed package, started by a static script (no inline JS)."""
    return templates.TemplateResponse(request, "docs.html", {})


@router.get("/static/vendor/{name}")
def vendor_file(name: str) -> FileResponse:
    """Third-party browser files from installed Python packages: nothing loads from a CDN."""
    if name not in VENDOR_FILES:
        raise NotFound(f"no vendored file {name!r}")
    path, media_type = VENDOR_FILES[name]
    if not path.exists():
        raise NotFound(f"{name} is missing from its installed package")
    return FileResponse(
        path, media_type=media_type, headers={"Cache-Control": "public, max-age=86400"}
    )
