"""What the organisation's cadence plan (app/portfolio/plan.py) reads of a pipeline beyond
its bill: how long its runs take (the cadences a week can hold) and whether its A/B gate
forbids going faster."""

from __future__ import annotations

from sqlalchemy.orm import Session

from app.analytics import costs
from app.analytics import repository as repo
from app.analytics.missing import NotEnoughData
from app.analytics.reads import read_runs
from app.analytics.service import gate, gate_thresholds
from app.db.models import Pipeline
from app.planning.model import PlanningError
from app.planning.scenario import RUN_WINDOW, Scenario


def typical_wall_clock_hours(session: Session, pipeline: costs.Costed) -> float | None:
    """The median wall clock (hours) of the production variant's newest RUN_WINDOW runs,
    what caps the runs a week can hold (k <= 168 / T); None without runs."""
    rows = repo.recent_runs(
        session, pipeline.id, variant=pipeline.production_variant, limit=RUN_WINDOW
    )
    hours = sorted(r.facts.wall_clock_hours for r in rows)
    return hours[len(hours) // 2] if hours else None


def gate_fails(session: Session, pipeline: Pipeline, candidate: str = "candidate") -> bool:
    """Whether the A/B gate of the production variant against ``candidate`` says FAIL at
    the default scenario's target cadence (the overview card's verdict). No candidate
    runs, too few, or a gate that cannot be worked out: False (nothing forbids)."""
    baseline = pipeline.production_variant
    runs = read_runs(session, pipeline, (baseline, candidate))
    if candidate not in runs.names or baseline not in runs.names:
        return False
    try:
        out = gate(
            pipeline,
            runs,
            baseline=baseline,
            candidate=candidate,
            scenario=Scenario(),
            thresholds=gate_thresholds(pipeline),
        )
    except PlanningError:
        return False
    return not isinstance(out, NotEnoughData) and out.result.verdict == "FAIL"
