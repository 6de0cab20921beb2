"""What each page shows: planning results gathered for a template (no HTML here).

Each function reads through the analytics layer (SQL aggregation) and the pure planning
core, and turns results into figure dicts with the pure builders in ``figures``. Parts
that cannot be computed yet (no runs, no candidate, no budget) become an empty-state
message naming what to do next, never an empty chart.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import date, timedelta
from typing import Any

from sqlalchemy.orm import Session

from app.analytics import advice, org_weeks, reads
from app.analytics import service as analytics
from app.analytics import weekly as analytics_weekly
from app.analytics.schemas import CheckpointsOut, GateOut, LeversOut, ProjectionOut, ScalingOut
from app.db import memo
from app.db.models import Pipeline
from app.exceptions import Invalid
from app.pipelines import service as pipelines_service
from app.planning.economics import badput
from app.planning.model import PlanningError
from app.planning.scenario import RUN_WINDOW, Scenario
from app.planning.weekly import WeekSummary, last_complete_week, monday_of
from app.web import figures
from app.web.sparkline import sparkline_svg

CHART_RUNS = 52
TREND_WEEKS = 12


@dataclass(frozen=True)
class GateParams:
    """The gate's own settings; its cadence, price and budget come from the scenario."""

    baseline: str = "baseline"
    candidate: str = "candidate"
    min_uplift_points: float = 10.0
    quality_margin: float | None = None  # None: the pipeline's setting
    alpha: float = 0.05


@dataclass
class Section:
    """A figure (JSON-ready dict) or, when there is nothing to draw, a message."""

    figure: dict[str, Any] | None = None
    empty: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


# What a section may raise for settings it cannot work with (a price of 0 stored before
# the bounds, a scenario at the edge): the section says so, the page still answers.
SECTION_ERRORS = (Invalid, PlanningError)


# A section's refusal in a reader's words, by the field the API's message names: the API
# says which parameter to pass, a page says what to report or set, and where.
PAGE_WORDS = {
    "checkpoint_write_hours": "No checkpoint advice yet: the recorded runs show no time "
    "spent waiting on checkpoint writes. Report each run's checkpoint_hours (the Python "
    "client's `with run.checkpointing():` measures it).",
    "pipeline": "No runs yet: these figures appear once the training job reports its runs "
    "(see Reporting runs in the documentation).",
}


def sentence(exc: Exception) -> str:
    """A section's refusal as the sentence it shows in place of its content."""
    if isinstance(exc, Invalid):
        field = str((exc.fields or [{}])[0].get("field", ""))
        return PAGE_WORDS.get(field, exc.message)
    return f"Not shown with these settings: {exc}. Check the pipeline's settings."


def _section(fig: dict[str, Any], empty: str) -> Section:
    return Section(figure=fig) if figures.has_data(fig) else Section(empty=empty)


def projection_section(
    session: Session, pipeline: Pipeline, s: Scenario
) -> tuple[Section, ProjectionOut | None]:
    cadences = sorted({1.0, 2.0, pipeline.runs_per_week})
    try:
        out = analytics.projection(
            session, pipeline.name, variants=None, cadences=cadences, scenario=s
        )
    except SECTION_ERRORS as exc:
        return Section(empty=sentence(exc)), None
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


def variant_names(session: Session, pipeline: Pipeline) -> list[str]:
    return reads.variant_names(session, pipeline)


def observed_utilization(session: Session, pipeline: Pipeline) -> float | None:
    """Median utilization of the recent runs of the default variant (the slider's start)."""
    names = analytics.default_variants(
        variant_names(session, pipeline), pipeline.production_variant
    )
    if not names:
        return None
    rows = reads.recent_runs(session, pipeline, variant=names[0], limit=RUN_WINDOW)
    return statistics.median(r.facts.gpu_utilization for r in rows) if rows else None


def weekly(
    session: Session, pipeline: Pipeline, weeks: int = TREND_WEEKS
) -> tuple[list[WeekSummary], list[str]]:
    """The weeks of the goodput trend, and its warnings (e.g. mixed utilization sources)."""
    out = analytics_weekly.goodput(session, pipeline.name, weeks=weeks, until=None)
    return out.weeks, out.warnings


def trend_sections(summaries: list[WeekSummary]) -> dict[str, Section]:
    hint = "No runs in these weeks yet: post runs to /api/v1/runs and they appear here."
    return {
        "goodput": _section(figures.goodput_trend_figure(summaries), hint),
        "week_gpu": _section(figures.badput_by_week_figure(summaries, "gpu_hours"), hint),
        "week_usd": _section(figures.badput_by_week_figure(summaries, "usd"), hint),
    }


def run_sections(session: Session, pipeline: Pipeline) -> dict[str, Section]:
    rows = reads.recent_runs(session, pipeline, limit=CHART_RUNS)
    hint = "No runs yet: post one to /api/v1/runs (see docs/reporting.md) or run `cadence demo`."
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
    return {
        "run_gpu": _section(figures.badput_by_run_figure(gpu, "gpu_hours"), hint),
        "run_usd": _section(figures.badput_by_run_figure(usd, "usd"), hint),
        "quality": _section(
            figures.utilization_quality_figure(points, pipeline.quality_metric), hint
        ),
    }


def with_pipeline_defaults(g: GateParams, pipeline: Pipeline) -> GateParams:
    """The gate's settings with the pipeline's quality margin where the page gave none,
    so the form shows the margin in force."""
    if g.quality_margin is not None:
        return g
    return replace(g, quality_margin=pipeline.quality_margin)


def gate_section(
    session: Session, pipeline: Pipeline, g: GateParams, s: Scenario
) -> tuple[GateOut | None, str | None]:
    names = variant_names(session, pipeline)
    missing = [v for v in (g.baseline, g.candidate) if v not in names]
    if missing:
        return None, (
            f"No runs of variant {missing[0]!r} yet. Post runs with "
            f'"variant": "{missing[0]}" (at least 3 per arm) to compare '
            f"{g.baseline!r} with {g.candidate!r}. Variants so far: "
            f"{', '.join(names) or 'none'}."
        )
    try:
        thresholds = analytics.thresholds_for(
            pipeline,
            min_uplift_points=g.min_uplift_points,
            quality_margin=g.quality_margin,
            alpha=g.alpha,
        )
        return analytics.gate(
            session,
            pipeline.name,
            baseline=g.baseline,
            candidate=g.candidate,
            scenario=s,
            thresholds=thresholds,
        ), None
    except SECTION_ERRORS as exc:
        return None, sentence(exc)


def scaling_section(
    session: Session, pipeline: Pipeline, s: Scenario
) -> tuple[Section, ScalingOut]:
    out = advice.scaling(session, pipeline.name, variant=None, workers=None, scenario=s)
    fig = figures.scaling_figure(out.table, out.model)
    hint = (
        "No scaling probes yet: record short runs of the same job at two or more worker "
        'counts (same variant, e.g. "scaling-probe") to see speedup and efficiency.'
    )
    return (_section(fig, hint) if len(out.table) >= 2 else Section(empty=hint)), out


def levers_section(
    session: Session, pipeline: Pipeline, s: Scenario
) -> tuple[LeversOut | None, str | None]:
    try:
        return advice.levers(session, pipeline.name, variant=None, scenario=s), None
    except SECTION_ERRORS as exc:
        return None, sentence(exc)


def checkpoint_section(
    session: Session, pipeline: Pipeline, s: Scenario
) -> tuple[Section, CheckpointsOut | None]:
    try:
        out = advice.checkpoints(
            session,
            pipeline.name,
            variant=None,
            scenario=s,
            instances=None,
            checkpoint_write_hours=None,
            restart_hours=None,
        )
    except SECTION_ERRORS as exc:
        return Section(empty=sentence(exc)), None
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
    pipeline: Pipeline
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
    rows = reads.recent_runs(session, pipeline, limit=12)
    production = reads.recent_runs(session, pipeline, limit=12, variant=pipeline.production_variant)
    verdict, note = None, "no candidate runs yet"
    gate, message = gate_section(session, pipeline, GateParams(), Scenario())
    if gate is not None:
        # The badge says PASS / FAIL / NOT YET: the note is the reason after it.
        verdict, note = gate.result.verdict, gate.headline.split(": ", 1)[-1]
    elif message:
        note = message.split(".")[0]
    return verdict, note, [r.facts.cost_usd for r in production], len(rows)


def cards(
    session: Session,
    pipelines: list[Pipeline],
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
    window = org_weeks.org_window(session, [p.id for p in pipelines], monday_of(today))
    kept = memo.kept(session, "overview_cards")
    out = []
    for pipeline in pipelines:
        key = (window.signature(pipeline.id), pipelines_service.settings_key(pipeline))
        found = kept.get(pipeline.id)
        if found is None or found[0] != key:
            found = kept[pipeline.id] = (key, _card_parts(session, pipeline))
        verdict, note, costs, runs = found[1]
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
