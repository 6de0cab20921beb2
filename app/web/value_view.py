"""The pipeline page's "What retraining more often buys" section (methodology.md §11).

Reads through the cadence and evaluations services and turns the results into figures
with the pure builders of ``figures_value``; anything that cannot be computed yet (no
evaluations, no value set) becomes a sentence saying what to do.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.orm import Session

from app.cadence import service as cadence
from app.cadence.schemas import CadenceOut
from app.db.models import Pipeline
from app.evaluations.service import quality_points
from app.exceptions import Invalid
from app.planning.cadence_value import every
from app.planning.decay import MIN_POINTS
from app.planning.scenario import Scenario as PlanningScenario
from app.web.figures_value import cadence_curve_figure, decay_figure
from app.web.views import SECTION_ERRORS, Section, sentence


@dataclass(frozen=True)
class ValueSection:
    curve: Section
    decay: Section
    sentence: str | None
    out: CadenceOut | None
    value_per_hundredth: float | None
    optimum_every: str | None


def value_section(
    session: Session, pipeline: Pipeline, p: PlanningScenario, variant: str | None = None
) -> ValueSection:
    """For the scenario (its what-ifs and its cadence, the proposal) and the variant the
    decision is about (the gate's candidate when there is one)."""
    value = pipeline.quality_value_usd_per_unit_month
    per_hundredth = value / 100.0 if value is not None else None
    try:
        fit = cadence.decay_fit(session, pipeline.name)
    except Invalid:
        message = (
            f"No decay curve yet: it needs at least {MIN_POINTS} evaluations of the serving "
            f"model's {pipeline.quality_metric} at two or more model ages. Report them with "
            "`cadence report-evaluations` or the Python client (see Reporting runs in the "
            "documentation)."
        )
        return ValueSection(Section(empty=message), Section(empty=message), None, None, None, None)
    points = quality_points(session, pipeline)
    decay = Section(
        figure=decay_figure(points, fit, pipeline.quality_metric, pipeline.higher_is_better)
    )
    if value is None:
        message = (
            f"No value set: an admin enters what one unit of {pipeline.quality_metric} is "
            "worth per month (the quality value on the settings page) to see the "
            "cost-optimal cadence."
        )
        return ValueSection(Section(empty=message), decay, None, None, None, None)
    proposed = p.target(pipeline.runs_per_week)
    scenario = cadence.Scenario(p.what_if(), p.convention, p.budget, variant, proposed)
    try:
        out = cadence.cadence(session, pipeline.name, scenario)
    except SECTION_ERRORS as exc:
        return ValueSection(Section(empty=sentence(exc)), decay, None, None, per_hundredth, None)
    curve = Section(figure=cadence_curve_figure(out.curve, out.optimum, out.today))
    optimum = every(out.optimum.interval_days)
    return ValueSection(curve, decay, out.sentence, out, per_hundredth, optimum)
