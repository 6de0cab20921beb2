"""What each page shows: planning results gathered for a template (no HTML here).

The pipeline page's sections are functions of its one context
(:class:`app.web.page_context.PipelinePageContext`, read once per request): each asks
the analytics layer's pure answers and turns results into figure dicts with the pure
builders in ``figures``. Parts that cannot be computed yet (no runs, no candidate, no
budget) are a ``NotEnoughData`` value that becomes an empty-state message naming what
to do next, never an empty chart.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta
from functools import partial
from typing import Any

from sqlalchemy.orm import Session

from app.analytics import advice, org_weeks
from app.analytics import service as analytics
from app.analytics.missing import NotEnoughData
from app.analytics.reads import RunReads, default_variants, read_runs
from app.analytics.schemas import CheckpointsOut, GateOut, LeversOut, ProjectionOut, ScalingOut
from app.db.kept import KeptMap
from app.db.models import Pipeline
from app.pipelines import service as pipelines_service
from app.pipelines.notes import ChangePoint
from app.pipelines.service import Brief
from app.planning.budget_status import DEFAULT_RISK_TOLERANCE
from app.planning.economics import badput
from app.planning.model import PlanningError
from app.planning.scenario import Scenario
from app.planning.weekly import WeekSummary, last_complete_week, monday_of
from app.web import figures
from app.web import figures_marks as marks
from app.web.page_context import GateParams, PipelinePageContext
from app.web.sparkline import sparkline_svg

# A card's gate verdict, note, costs and run count by pipeline id while its change count
# and settings are as read.
KEPT_CARDS: KeptMap[int, tuple[str | None, str, list[float], int]] = KeptMap("overview_cards")


@dataclass
class Section:
    """A figure (JSON-ready dict) or, when there is nothing to draw, a message."""

    figure: dict[str, Any] | None = None
    empty: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


# A section's refusal in a reader's words, by the field the API's message names: the API
# says which parameter to pass, a page says what to report or set, and where.
PAGE_WORDS = {
    "checkpoint_write_hours": "No checkpoint advice yet: the recorded runs show no time "
    "spent waiting on checkpoint writes. Report each run's checkpoint_hours (the Python "
    "client's `with run.checkpointing():` measures it).",
    "pipeline": "No runs yet: these figures appear once the training job reports its runs "
    "(see Reporting runs in the documentation).",
    "variant": "No runs of this variant yet: these figures appear once the training job "
    "reports runs of it (see Reporting runs in the documentation); the pipeline's settings "
    "choose the variant in production.",
}


def sentence(missing: NotEnoughData | PlanningError) -> str:
    """What a section shows in place of its content: what is missing, or the setting
    it cannot work with (a price of 0 stored before the bounds, a scenario at the edge:
    the section says so, the page still answers)."""
    if isinstance(missing, NotEnoughData):
        return PAGE_WORDS.get(missing.field, missing.message)
    return f"Not shown with these settings: {missing}. Check the pipeline's settings."


def _section(fig: dict[str, Any], empty: str) -> Section:
    return Section(figure=fig) if figures.has_data(fig) else Section(empty=empty)


def projection_section(ctx: PipelinePageContext) -> tuple[Section, ProjectionOut | None]:
    pipeline, s = ctx.pipeline, ctx.scenario
    cadences = sorted({1.0, 2.0, pipeline.runs_per_week})
    try:
        out = analytics.projection(
            pipeline,
            ctx.runs,
            variants=None,
            cadences=cadences,
            scenario=s,
            month_to_date=ctx.month_to_date,
            risk_tolerance=ctx.risk_tolerance,
        )
    except PlanningError as exc:
        return Section(empty=sentence(exc)), None
    if isinstance(out, NotEnoughData):
        return Section(empty=sentence(out)), None
    fig = figures.cost_projection_figure(out.projections, s.budget_or(pipeline.monthly_budget_usd))
    return Section(figure=fig), out


def headline(out: ProjectionOut | None) -> list[dict[str, Any]]:
    """Monthly cost at the scenario's cadence per variant, against the budget and today."""
    if out is None:
        return []
    target = out.scenario.target_runs_per_week
    rows = []
    for variant in out.variants:
        proj = out.projections[variant]
        at = next(c for c in proj.cadences if c.runs_per_week == target)
        rows.append(
            {
                "variant": variant,
                "runs_per_week": target,
                "monthly_cost_usd": at.monthly_cost_usd,
                "p10": at.monthly_cost_p10_usd,
                "p90": at.monthly_cost_p90_usd,
                "p_over_budget": at.p_over_budget,
                "within_budget": at.within_budget,
                "monthly_gpu_hours": at.monthly_gpu_hours,
                "headroom_usd": at.headroom_usd,
                "vs_current_ratio": at.vs_current_ratio,
                "current_monthly_cost_usd": proj.current_monthly_cost_usd,
                "window": out.windows[variant].label,
                "working": list(at.working),
                "warnings": list(proj.warnings),
            }
        )
    return rows


def observed_utilization(ctx: PipelinePageContext) -> float | None:
    """Median utilization of the recent runs of the default variant (the slider's start)."""
    names = default_variants(ctx.runs.names, ctx.pipeline.production_variant)
    rows = ctx.runs.window(names[0]) if names else []
    return statistics.median(r.facts.gpu_utilization for r in rows) if rows else None


def _marks(ctx_changes: Sequence[ChangePoint]) -> list[marks.Mark]:
    return [marks.Mark(c.at, c.description) for c in ctx_changes]


def trend_sections(
    summaries: list[WeekSummary], changes: Sequence[ChangePoint] = ()
) -> dict[str, Section]:
    """The weekly charts, the changes marked on goodput's (where it went, and why)."""
    mondays = [w.week_start for w in summaries]
    goodput = marks.on_weeks(figures.goodput_trend_figure(summaries), mondays, _marks(changes))
    hint = (
        "No runs in these weeks yet: they appear here once the training job reports its runs "
        "(see Reporting runs in the documentation)."
    )
    return {
        "goodput": _section(goodput, hint),
        "week_gpu": _section(figures.badput_by_week_figure(summaries, "gpu_hours"), hint),
        "week_usd": _section(figures.badput_by_week_figure(summaries, "usd"), hint),
    }


def run_sections(ctx: PipelinePageContext) -> dict[str, Section]:
    rows = ctx.runs.recent
    hint = (
        "No runs yet: add `cadence report` (or the Python client) to the training job, as "
        "Reporting runs in the documentation shows, or run `cadence demo` for example data."
    )
    gpu = [
        figures.RunBadputRow(r.run_id, r.variant, r.started_at, badput(r.facts)) for r in rows[-26:]
    ]
    usd = [
        figures.RunBadputRow(
            b.label, b.variant, b.started_at, b.badput.usd(r.facts.price_per_gpu_hour)
        )
        for b, r in zip(gpu, rows[-26:], strict=True)
    ]
    points = [
        figures.RunPoint(
            r.started_at, r.variant, r.facts.gpu_utilization, r.facts.quality_value, r.run_id
        )
        for r in rows
    ]
    quality = figures.utilization_quality_figure(points, ctx.pipeline.quality_metric)
    starts, changed = [b.started_at for b in gpu], _marks(ctx.changes)
    return {
        "run_gpu": _section(
            marks.on_runs(figures.badput_by_run_figure(gpu, "gpu_hours"), starts, changed), hint
        ),
        "run_usd": _section(
            marks.on_runs(figures.badput_by_run_figure(usd, "usd"), starts, changed), hint
        ),
        "quality": _section(quality, hint),
    }


def gate_section(ctx: PipelinePageContext) -> tuple[GateOut | None, str | None]:
    return gate_answer(ctx.pipeline, ctx.runs, ctx.gate, ctx.scenario, ctx.risk_tolerance)


def gate_answer(
    pipeline: Pipeline,
    runs: RunReads,
    g: GateParams,
    s: Scenario,
    risk_tolerance: float = DEFAULT_RISK_TOLERANCE,
) -> tuple[GateOut | None, str | None]:
    """The gate, or the sentence saying what it still needs."""
    names = runs.names
    missing = [v for v in (g.baseline, g.candidate) if v not in names]
    if missing:
        return None, (
            f"No runs of variant {missing[0]!r} yet. Post runs with "
            f'"variant": "{missing[0]}" (at least 3 per arm) to compare '
            f"{g.baseline!r} with {g.candidate!r}. Variants so far: "
            f"{', '.join(names) or 'none'}."
        )
    try:
        thresholds = analytics.gate_thresholds(
            pipeline,
            min_uplift_points=g.min_uplift_points,
            quality_margin=g.quality_margin,
            alpha=g.alpha,
            risk_tolerance=risk_tolerance,
        )
        out = analytics.gate(
            pipeline,
            runs,
            baseline=g.baseline,
            candidate=g.candidate,
            scenario=s,
            thresholds=thresholds,
        )
    except PlanningError as exc:
        return None, sentence(exc)
    return (None, sentence(out)) if isinstance(out, NotEnoughData) else (out, None)


def scaling_section(ctx: PipelinePageContext) -> tuple[Section, ScalingOut]:
    out = advice.scaling(ctx.pipeline, ctx.runs, ctx.scenario)
    fig = figures.scaling_figure(out.table, out.model)
    hint = (
        "No scaling probes yet: record short runs of the same job at two or more worker "
        'counts (same variant, e.g. "scaling-probe") to see speedup and efficiency.'
    )
    return (_section(fig, hint) if len(out.table) >= 2 else Section(empty=hint)), out


def levers_section(ctx: PipelinePageContext) -> tuple[LeversOut | None, str | None]:
    try:
        out = advice.levers(ctx.pipeline, ctx.runs, None, ctx.scenario)
    except PlanningError as exc:
        return None, sentence(exc)
    return (None, sentence(out)) if isinstance(out, NotEnoughData) else (out, None)


def checkpoint_section(ctx: PipelinePageContext) -> tuple[Section, CheckpointsOut | None]:
    try:
        out = advice.checkpoints(ctx.pipeline, ctx.runs, variant=None, scenario=ctx.scenario)
    except PlanningError as exc:
        return Section(empty=sentence(exc)), None
    if isinstance(out, NotEnoughData):
        return Section(empty=sentence(out)), None
    i = out.inputs
    fig = figures.checkpoint_figure(
        out.advice,
        write_hours=i["checkpoint_write_hours"].value,
        workers=i["paid_gpus"].value,
        wall_clock_hours=i["wall_clock_hours"].value,
        restart_overhead_hours=i["restart_hours"].value,
    )
    return _section(fig, "Not enough data for checkpoint advice yet."), out


# Overview and review ----------------------------------------------------------------


@dataclass(frozen=True)
class Card:
    pipeline: Brief
    monthly_cost_usd: float | None
    budget_usd: float | None
    this_week: float | None
    last_week: float | None
    verdict: str | None
    verdict_note: str
    spark_values: list[float]  # cost per run of the production variant, oldest first
    sparkline: str  # the same as inline SVG ("" when there is nothing to draw)
    runs: int  # runs of any variant among the latest 12 (0: "No runs yet")


def _card_parts(session: Session, pipeline: Pipeline) -> tuple[str | None, str, list[float], int]:
    """A card's gate verdict and its reason, the production variant's cost per run
    (oldest first: the line shows the variant the card's monthly cost is about, never an
    A/B candidate's or a scaling probe's runs between its points; their spend is on the
    month's line) and the run count of every variant."""
    g = GateParams()
    runs = read_runs(session, pipeline, (g.baseline, g.candidate), recent=12)
    rows = runs.recent[-12:]
    production = runs.window(pipeline.production_variant)[-12:]
    verdict, note = None, "no candidate runs yet"
    gate, message = gate_answer(pipeline, runs, g, Scenario())
    if gate is not None:
        # The badge says PASS / FAIL / NOT YET: the note is the reason after it.
        verdict, note = gate.result.verdict, gate.headline.split(": ", 1)[-1]
    elif message:
        note = message.split(".")[0]
    return verdict, note, [r.facts.cost_usd for r in production], len(rows)


def _missing_cards(
    session: Session, names: Mapping[int, str], ids: list[int]
) -> dict[int, tuple[str | None, str, list[float], int]]:
    """The parts of the cards not kept, their pipelines read in one statement (a warm
    overview reads none: the portfolio's briefs key the cards)."""
    read = pipelines_service.page(session, only=[names[i] for i in ids])
    return {p.id: _card_parts(session, p) for p in read}


def cards(
    session: Session,
    pipelines: list[Brief],
    today: date,
    monthly_costs: Mapping[str, float | None],
) -> list[Card]:
    """The overview's cards. Goodput of the last complete week and the week before comes
    from the portfolio's kept window (``analytics.org_weeks``) and the monthly cost from
    its rows (by name), so cards and totals agree; only the gate and the sparkline are
    read per card, and kept while the pipeline's runs and settings are unchanged."""
    # The last complete week against the one before, as the weekly review shows them: on
    # a Monday the week that has just started has no runs yet.
    monday = last_complete_week(today)
    prev = monday - timedelta(weeks=1)
    production = {p.id: p.production_variant for p in pipelines}
    window = org_weeks.org_window(session, list(production), monday_of(today), production)
    keys = ((p.id, (window.change_count(p.id), p)) for p in pipelines)  # a brief: every setting
    names = {p.id: p.name for p in pipelines}
    found = KEPT_CARDS.get_many(session, keys, partial(_missing_cards, session, names))
    out = []
    for pipeline in pipelines:
        verdict, note, costs, runs = found[pipeline.id]
        out.append(
            Card(
                pipeline=pipeline,
                monthly_cost_usd=monthly_costs.get(pipeline.name),
                budget_usd=pipeline.monthly_budget_usd,
                this_week=window.overall(pipeline.id, monday),
                last_week=window.overall(pipeline.id, prev),
                verdict=verdict,
                verdict_note=note,
                spark_values=costs,
                sparkline=sparkline_svg(
                    costs, f"Cost per {pipeline.production_variant} run, last {len(costs)}"
                ),
                runs=runs,
            )
        )
    return out
