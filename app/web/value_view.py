"""The pipeline page's "What retraining more often buys" section (methodology.md §11).

Computed from the page's context (its evaluations and run windows) by the cadence
service's pure answers, turned into figures with the pure builders of ``figures_value``;
anything that cannot be computed yet (no evaluations, no value set) becomes a sentence
saying what to do.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.analytics.missing import NotEnoughData
from app.cadence import service as cadence
from app.cadence.schemas import CadenceOut
from app.planning.cadence_value import every
from app.planning.decay import MIN_POINTS
from app.planning.model import PlanningError
from app.web.figures_value import cadence_curve_figure, decay_figure
from app.web.page_context import PipelinePageContext
from app.web.views import Section, sentence


@dataclass(frozen=True)
class ValueSection:
    curve: Section
    decay: Section
    sentence: str | None
    out: CadenceOut | None
    value_per_hundredth: float | None
    optimum_every: str | None


def value_section(ctx: PipelinePageContext, variant: str | None = None) -> ValueSection:
    """For the scenario (its what-ifs and its cadence, the proposal) and the variant the
    decision is about (the gate's candidate when there is one)."""
    pipeline, p = ctx.pipeline, ctx.scenario
    value = pipeline.quality_value_usd_per_unit_month
    per_hundredth = value / 100.0 if value is not None else None
    fit = cadence.decay_fit(pipeline, ctx.quality)
    if isinstance(fit, NotEnoughData):
        message = (
            f"No decay curve yet: it needs at least {MIN_POINTS} evaluations of the serving "
            f"model's {pipeline.quality_metric} at two or more model ages. Report them with "
            "`cadence report-evaluations` or the Python client (see Reporting runs in the "
            "documentation)."
        )
        return ValueSection(Section(empty=message), Section(empty=message), None, None, None, None)
    decay = Section(
        figure=decay_figure(ctx.quality, fit, pipeline.quality_metric, pipeline.higher_is_better)
    )
    if value is None:
        message = (
            f"No value set: an admin enters what one unit of {pipeline.quality_metric} is "
            "worth per month (the quality value on the settings page) to see the "
            "cost-optimal cadence."
        )
        return ValueSection(Section(empty=message), decay, None, None, None, None)
    scenario = cadence.Scenario(p.what_if(), p.convention, p.budget, variant, ctx.target)
    try:
        out = cadence.cadence(pipeline, ctx.runs, ctx.quality, scenario)
    except PlanningError as exc:
        return ValueSection(Section(empty=sentence(exc)), decay, None, None, per_hundredth, None)
    if isinstance(out, NotEnoughData):
        return ValueSection(Section(empty=sentence(out)), decay, None, None, per_hundredth, None)
    curve = Section(figure=cadence_curve_figure(out.curve, out.optimum, out.today))
    optimum = every(out.optimum.interval_days)
    return ValueSection(curve, decay, out.sentence, out, per_hundredth, optimum)
