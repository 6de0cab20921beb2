"""Server-rendered pages. Figures arrive finished (pure builders); templates only embed them."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, StreamingResponse

from app.alerts.service import page_section as alerts_section
from app.analytics.scenario import ScenarioDep
from app.auth.service import visible_pipelines
from app.billing import service as billing
from app.db.engine import status_thresholds_of
from app.deps import DatabaseDep, ReadablePipeline, Viewer
from app.pipelines import changes as pipeline_changes
from app.pipelines.service import get_by_name
from app.planning.weekly import iso_week, last_complete_week
from app.planning.welch import ALPHA_MIN
from app.portfolio.plan_schemas import Budget, Risk
from app.portfolio.service import load_portfolio
from app.runs import listing
from app.templating import templates
from app.web import empties, page_context, views
from app.web.decision import decide
from app.web.figures import to_json
from app.web.plan_view import plan_section
from app.web.record_view import org_record_sentence, record_section
from app.web.value_view import value_section

router = APIRouter(include_in_schema=False)
OVERVIEW_PAGE = 24
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
    margin: Annotated[float | None, Query(ge=0, le=1e6)] = None,
    alpha: Annotated[float, Query(ge=ALPHA_MIN, lt=0.5)] = 0.05,
) -> page_context.GateParams:
    return page_context.GateParams(baseline, candidate, min_uplift, margin, alpha)


GateDep = Annotated[page_context.GateParams, Depends(gate_params)]


@router.get("/", response_class=HTMLResponse)
def overview(
    request: Request,
    db: DatabaseDep,
    viewer: Viewer,
    page: Annotated[int, Query(ge=1, le=10_000)] = 1,
    team: Annotated[str | None, Query(max_length=200)] = None,
    sort: Annotated[str, Query(pattern="^(name|spend|over_budget|goodput_change)$")] = "name",
    plan: bool = False,
    budget: Budget = None,
    risk: Risk = None,
) -> HTMLResponse:
    """The portfolio: totals of every visible pipeline first, the cadence plan (folded
    unless ``plan=1``), then a page of cards."""
    today = datetime.now(UTC).date()
    with db.read() as session:
        portfolio = load_portfolio(session, visible_pipelines(viewer), team or None, today)
        ordered = portfolio.ordered(sort)
        shown = ordered[(page - 1) * OVERVIEW_PAGE : page * OVERVIEW_PAGE]
        by_name = {p.name: p for p in portfolio.pipelines}  # listed once, for both
        costs = {r.name: r.monthly_cost_usd for r in shown}
        cards = views.cards(session, [by_name[r.name] for r in shown], today, costs)
        months = {r.name: r.month_to_date for r in shown}
        bill = billing.overview_reconciliation(session, visible_pipelines(viewer))
        record = org_record_sentence(session, [r.name for r in portfolio.rows])
        planned = plan_section(
            session, visible_pipelines(viewer), team or None, opened=plan, budget=budget, risk=risk
        )
        tolerance = status_thresholds_of(session).risk_tolerance
    return templates.TemplateResponse(
        request,
        "overview.html",
        {
            "cards": cards,
            "months": months,
            "page": page,
            "pages": max(1, -(-len(portfolio.rows) // OVERVIEW_PAGE)),
            "week": iso_week(last_complete_week(today)),
            "to_json": to_json,
            "totals": portfolio.totals,
            "teams": portfolio.teams,
            "team": team or "",
            "sort": sort,
            "query": dict(request.query_params),
            "month": today.strftime("%B %Y"),
            "bill": bill,
            "org_record": record,
            "plan": planned,
            "risk_tolerance": tolerance,
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
    unit: Annotated[Literal["gpu", "usd"], Query()] = "gpu",  # the badput charts' unit
) -> HTMLResponse:
    with db.read() as session:
        ctx = page_context.build(session, name, p, g, dict(request.query_params))
        pipeline, total = ctx.pipeline, ctx.runs.total_runs
        runs = listing.table_page(
            session, pipeline.id, sort=sort, descending=order == "desc", number=page, size=size
        )
        context = _whatif_context(ctx)
        context.update(
            {
                "trend": views.trend_sections(ctx.weeks.weeks, ctx.changes),
                "changes": ctx.changes,
                "weeks": ctx.weeks.weeks,
                "trend_warnings": ctx.weeks.warnings,
                "runs_charts": views.run_sections(ctx),
                "runs": runs,
                "total_runs": total,
                "sort": sort,
                "order": order,
                "page": page,
                "size": size,
                "unit": unit,
                "pages": max(1, -(-total // size)),
                "history": pipeline_changes.recent(session, pipeline.id, limit=5),
                "observed_utilization": views.observed_utilization(ctx),
                "alerts": alerts_section(session, pipeline),
                "forecast_record": record_section(session, pipeline),
            }
        )
        scaling, context["scaling_out"] = views.scaling_section(ctx)
        context["scaling"] = scaling
        empties.one_box_each(context, no_runs=total == 0)
    return templates.TemplateResponse(request, "pipeline.html", context)


def _whatif_context(ctx: page_context.PipelinePageContext) -> dict[str, Any]:
    """Every figure that depends on the scenario, the gate included: one re-render
    keeps the cost cards, levers, checkpoints and the gate on the same scenario."""
    pipeline = ctx.pipeline
    cost, projection = views.projection_section(ctx)
    gate, gate_empty = views.gate_section(ctx)
    levers, levers_empty = views.levers_section(ctx)
    checkpoint, checkpoint_out = views.checkpoint_section(ctx)
    headline = views.headline(projection)
    descriptions = pipeline.variant_descriptions or {}
    # What a faster cadence buys, for the variant the decision is about: the gate's
    # candidate when the gate has one to judge, else the production variant.
    about = ctx.gate.candidate if gate is not None else None
    budget = projection.scenario.budget_usd if projection else pipeline.monthly_budget_usd
    return {
        "decision": decide(
            headline, budget, gate, ctx.target, descriptions, basis=pipeline.gate_cost_basis
        ),
        "descriptions": descriptions,
        "pipeline": pipeline,
        "p": ctx.scenario,
        "target": ctx.target,
        "cost": cost,
        "headline": headline,
        "projection": projection,
        "levers": levers,
        "levers_empty": levers_empty,
        "checkpoint": checkpoint,
        "checkpoint_out": checkpoint_out,
        "to_json": to_json,
        "gate": gate,
        "gate_empty": gate_empty,
        "g": ctx.gate,
        "query": ctx.query,
        "variants": ctx.runs.names,
        "whatif_keys": SCENARIO_KEYS,
        "value": value_section(ctx, variant=about),
        "bill": ctx.bill,
        "price_note": ctx.price_note,
        "risk_tolerance": ctx.risk_tolerance,
        "month_name": datetime.now(UTC).strftime("%B"),
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
        ctx = page_context.build(session, name, p, g, dict(request.query_params))
        context = _whatif_context(ctx)
    env = templates.env
    html = env.get_template("_whatif.html").render(request=request, **context)
    decision = env.get_template("_decision.html").render(request=request, **context)
    engineer = env.get_template("_whatif_engineer.html").render(request=request, **context)
    value = env.get_template("_value.html").render(request=request, **context)
    return JSONResponse(
        {
            "html": html,
            "decision_html": decision,
            "engineer_html": engineer,
            "value_html": value,
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


@router.get("/help", response_class=HTMLResponse)
def help_page(request: Request) -> HTMLResponse:
    return templates.TemplateResponse(request, "help.html", {})


@router.get("/docs", response_class=HTMLResponse)
def api_docs(request: Request) -> HTMLResponse:
    """Swagger UI from the installed package, started by a static script (no inline JS)."""
    return templates.TemplateResponse(request, "docs.html", {})
