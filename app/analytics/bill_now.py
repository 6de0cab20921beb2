"""Today's expected bill: one figure, wherever a pipeline's monthly cost is shown.

The expected bill of a typical month at the pipeline's current cadence, its retrainings
priced by the cost series (app/planning/cost_series.py: the latest change point, the
trend, the organisation's prior for how often a retraining needs extra attempts), the
month starting at 00:00 UTC today. The portfolio, the weekly review, the overview,
/metrics, the pipeline page's "today" (the projection's ``current_monthly_cost_usd``)
and the cost alert show this one number; the projection at the current cadence without
what-ifs gives it too (``tests/analytics/test_bill_now.py`` checks that they agree).

Org-wide it is made from the month's kept inputs (``app.analytics.month``: the window
of retraining costs and the declared changes, read again only for pipelines whose runs
changed) and kept itself (the kept map ``bill_now``) while those inputs, the cadence,
the organisation's prior and the day are equal: a warm request computes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from sqlalchemy.orm import Session

from app.analytics.cost_models import cost_models, model_of
from app.analytics.month import Budgeted, declared_days, inputs_of
from app.analytics.prior import org_prior
from app.analytics.reads import RunReads, read_runs
from app.analytics.series_context import series_context, today_day
from app.db.cost_reads import Series
from app.db.engine import status_thresholds_of
from app.db.kept import KeptMap
from app.db.models import Pipeline
from app.planning.cost_series import OrgPrior
from app.planning.projection import project_costs
from app.planning.scenario import RUN_WINDOW
from app.planning.schedule import CALENDAR
from app.planning.series_bill import typical_expected_bill

KEPT_BILLS: KeptMap[tuple[int, int], float] = KeptMap("bill_now")


def expected_bill_now(
    series: Series,
    declared: Sequence[tuple[float, str]],
    runs_per_week: float,
    day: float,
    prior: OrgPrior,
    convention: str = CALENDAR,
) -> float:
    """The expected bill of a typical month at ``runs_per_week`` from ``day``, the
    retrainings priced by the cost model of ``series`` (not empty); calendar months
    unless a scenario asks for another ``convention``."""
    return typical_expected_bill(model_of(series, declared, prior), runs_per_week, day, convention)


def declared_of(latest: datetime | None) -> tuple[tuple[float, str], ...]:
    """A pipeline page's latest declared change as the cost model reads it."""
    return declared_days([(latest, "")]) if latest is not None else ()


def current_monthly_costs(
    session: Session, pipelines: Sequence[Budgeted], now: datetime | None = None
) -> dict[int, float]:
    """Today's expected bill of each pipeline, by id (a pipeline whose production variant
    has no retraining is absent)."""
    now = now or datetime.now(UTC)
    if not pipelines:
        return {}
    inputs = inputs_of(session, pipelines, now, RUN_WINDOW)
    prior, day = org_prior(session), today_day(now)
    made = {
        (p.id, RUN_WINDOW): ((i.key, p.runs_per_week, prior, day), (i, p.runs_per_week))
        for p, i in zip(pipelines, inputs, strict=True)
        if i.costs
    }

    def make(slots: list[tuple[int, int]]) -> dict[tuple[int, int], float]:
        # The models the month to date fitted (months() runs first on every org page).
        models = cost_models(
            session, {s: (made[s][1][0].costs, made[s][1][0].declared, prior) for s in slots}
        )
        return {s: typical_expected_bill(models[s], made[s][1][1], day, CALENDAR) for s in slots}

    keys = ((slot, version) for slot, (version, _) in made.items())
    return {pid: v for (pid, _), v in KEPT_BILLS.get_many(session, keys, make).items()}


def bill_today(
    pipeline: Budgeted, runs: RunReads, variant: str, convention: str = CALENDAR
) -> float:
    """Today's expected bill of one pipeline from ``variant``'s series as its page read
    it (``RunReads``: the window, the abandoned retrainings, the latest change, the
    prior)."""
    declared = declared_of(runs.latest_change)
    day = today_day(datetime.now(UTC))
    return expected_bill_now(
        runs.series(variant), declared, pipeline.runs_per_week, day, runs.prior, convention
    )


def current_monthly_cost(session: Session, pipeline: Pipeline) -> float | None:
    """Today's expected bill, read from scratch: what the org-wide pages keep, and what
    ``GET .../projection?cadences=<runs_per_week>`` gives for the production variant
    without what-ifs. None when no retraining of the production variant was stored."""
    runs = read_runs(session, pipeline)
    if not runs.series(pipeline.production_variant):
        return None
    return bill_today(pipeline, runs, pipeline.production_variant)


def current_bill_at_risk(session: Session, pipeline: Pipeline) -> tuple[float, float] | None:
    """(the bill at risk, the expected bill) at the current cadence: the bill the one test
    is about, the (1 - CADENCE_RISK_TOLERANCE) quantile (the p90 at 10%;
    app/planning/verdict.py), from the projection's forecast (the cost series). The
    cost_over_budget alert holds it against the budget."""
    runs = read_runs(session, pipeline)
    variant = pipeline.production_variant
    rows = runs.window(variant)
    if not rows:
        return None
    proj = project_costs(
        [r.facts for r in rows],
        [pipeline.runs_per_week],
        convention=CALENDAR,
        risk_tolerance=status_thresholds_of(session).risk_tolerance,
        series=series_context(runs, variant, rows),
    )
    at = proj.cadences[0]
    return at.bill_at_risk_usd, at.expected_bill_usd
