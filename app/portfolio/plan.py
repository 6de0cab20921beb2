"""The organisation's cadence plan (``GET /api/v1/portfolio/plan``, its CSV, the
overview's plan section, ``cadence plan``): each visible pipeline's options read from
what the app already computes, then app/planning/org_plan_report.py.

Per pipeline: the bill at each cadence is the projection's (``bill_at``: the window of
retraining costs the portfolio keeps, ``analytics.costs.windows``, forecast over the
typical month at k runs a week), with draws seeded by the pipeline's id so pipelines are
independent and one pipeline's cadences share their random numbers; the staleness cost
is section 8's ``V x mean loss over 1/k weeks`` from the decay fitted to its
evaluations. Each pipeline's options are kept between requests (``app.db.kept``) under
what they depend on: its window (moved by every write of its production variant's
runs), cadence and the stamp of its evaluations and quality value; the whole plan is
recalled while every key, the budget and the risk are equal.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

import numpy as np
from sqlalchemy.orm import Session

from app.analytics import costs, month, plan_inputs
from app.analytics.prior import org_prior
from app.auth.service import TokenInfo
from app.db import rollup_reads
from app.db.cost_reads import Series
from app.db.engine import WriteSession
from app.db.kept import KeptMap
from app.db.models import OrgSetting
from app.evaluations import service as evaluations
from app.exceptions import Forbidden, Invalid
from app.pipelines import service as pipelines
from app.planning.bill import forecast_bill
from app.planning.cost_series import OrgPrior
from app.planning.decay import fit_decay
from app.planning.model import PlanningError
from app.planning.org_plan import Options, allowed_cadences
from app.planning.org_plan_report import OrgPlan, plan
from app.planning.projection import CALENDAR
from app.planning.scenario import RUN_WINDOW
from app.planning.schedule import typical_month_runs
from app.portfolio import repository

# Each pipeline's options by id while its settings, costs window and curve are as read;
# the whole plan by (token's pipelines, team, budget, risk) while every option's key is.
KEPT_OPTIONS: KeptMap[int, Options] = KeptMap("org_plan_options")
KEPT_PLAN: KeptMap[tuple[object, ...], tuple[OrgPlan, tuple[str, ...]]] = KeptMap("org_plan")

PLAN_DRAWS = 1000  # per pipeline and cadence: P(over) near 10% to about +-1 point
THIN_POINTS = 8  # a value curve from fewer evaluations is called thin
DEFAULT_RISK = 0.1


def bill_at(window: Sequence[float], runs_per_week: float, seed: int) -> tuple[float, np.ndarray]:
    """The expected bill and simulated bills of a month at ``runs_per_week``: the
    projection's bill at a cadence (app/planning/projection.py ``project_costs``' at(k))
    on the kept window, so the plan follows the app's forecast model."""
    found = forecast_bill(
        window, typical_month_runs(runs_per_week, CALENDAR), draws=PLAN_DRAWS, seed=seed
    )
    return found.expected_bill_usd, found.draws.astype(np.float32)


def _curve(
    session: Session, p: pipelines.Brief, stamp: tuple[Any, ...] | None
) -> tuple[Any, bool] | None:
    """The decay fitted to the pipeline's evaluations and whether it is thin, or None."""
    if stamp is None:
        return None
    higher, metric = stamp[3], stamp[4]
    points = evaluations.quality_points_of(session, p.id, metric)
    try:
        fit = fit_decay(points, higher_is_better=higher)
    except PlanningError:
        return None
    return fit.decay, fit.points < THIN_POINTS


def _options(
    session: Session,
    p: pipelines.Brief,
    window: tuple[float, ...],
    stamp: tuple[Any, ...] | None,
    thin_spread: bool,
) -> Options:
    today = p.runs_per_week
    curve = _curve(session, p, stamp)
    hours = plan_inputs.typical_wall_clock_hours(session, p) if curve else None
    # Only a pipeline the plan could move needs its gate (a few pipelines, read cold).
    forbids = bool(curve) and plan_inputs.gate_fails(
        session, pipelines.get_by_name(session, p.name)
    )
    ks = allowed_cadences(today, hours, forbids) if curve else (today,)
    bills = [bill_at(window, k, seed=p.id) for k in ks]
    faster = [k for k in allowed_cadences(today, None) if k > today]
    mean = sum(window) / len(window)
    return Options(
        name=p.name,
        today=today,
        cadences=ks,
        expected=tuple(e for e, _ in bills),
        draws=np.vstack([d for _, d in bills]),
        staleness=None
        if curve is None or stamp is None
        else tuple(float(stamp[2]) * curve[0].mean_loss(1.0 / k) for k in ks),
        thin_curve=bool(curve and curve[1]),
        thin_spread=thin_spread,
        gate_forbids=forbids,
        faster_usd=None
        if curve or not faster
        else mean * typical_month_runs(faster[0], CALENDAR).mean,
    )


def options_of(
    session: Session, briefs: Sequence[pipelines.Brief]
) -> tuple[list[Options], list[str], tuple[Any, ...]]:
    """Each pipeline's options (kept), the names of those without runs, and the key
    of them all."""
    ids = None if len(briefs) > costs.ID_LIST_LIMIT else [p.id for p in briefs]
    windows = costs.windows(session, briefs, RUN_WINDOW)
    stamps = evaluations.curve_stamps(session, ids)
    # Every run write of any variant moves it: the gate's candidate runs included.
    change_counts = rollup_reads.change_counts(session, ids) if stamps else {}
    # The forecasts borrow from the organisation (the gate's, and whether the bill's
    # spread is thin): any pipeline's run may move it.
    prior = org_prior(session)
    changes = month.declared_changes(session, ids)
    out, missing, keys = [], [], []
    for p in briefs:
        # The plan prices its cadences from the window's costs (costs.windows now gives
        # each retraining's (cost, extra attempts' cost, start)).
        series = windows.get(p.id, ())
        window = tuple(c for c, _, _ in series)
        if not window:
            missing.append(p.name)
            continue
        stamp = stamps.get(p.id)
        declared = month.declared_days(changes.get(p.id, ()))
        key = (p, series, declared, prior, stamp, change_counts.get(p.id) if stamp else None)
        make = partial(_thin_options, session, p, series, declared, stamp, prior)
        out.append(KEPT_OPTIONS.get(session, (p.id, key), make))
        keys.append(key)
    return out, missing, tuple(keys)


def _thin_options(
    session: Session,
    p: pipelines.Brief,
    series: Series,
    declared: tuple[tuple[float, str], ...],
    stamp: Any,
    prior: OrgPrior,
) -> Options:
    """:func:`_options`, its bill's spread thin exactly when the forecast borrows spread
    (the forecast's own flag, which its words say, with the organisation's prior)."""
    window = tuple(c for c, _, _ in series)
    return _options(session, p, window, stamp, month.borrows_spread(series, declared, prior))


def org_budget(session: Session) -> tuple[float | None, float]:
    """The stored org budget (None: not set) and risk tolerance."""
    row = repository.org_setting(session)
    return (None, DEFAULT_RISK) if row is None else (row.budget_usd, row.risk)


def check_org_admin(token: TokenInfo) -> None:
    """Only an admin whose token sees every pipeline sets the org's budget."""
    if token.pipelines is not None:
        raise Forbidden("this token is limited to some pipelines: the org budget is for all")


def set_org_budget(session: WriteSession, budget: float | None, risk: float, by: str) -> None:
    """Store the org budget and risk (the unit of work commits)."""
    row = repository.org_setting(session)
    if row is None:
        row = OrgSetting(id=repository.ROW_ID)
        session.add(row)
    row.budget_usd, row.risk, row.updated_by = budget, risk, by
    session.flush()


def _budget(session: Session, budget: float | None, risk: float | None) -> tuple[float, float]:
    stored, stored_risk = org_budget(session)
    chosen = budget if budget is not None else stored
    if chosen is None:
        raise Invalid(
            "no org budget",
            fields=[
                {"field": "budget", "reason": "pass budget= or set the org budget in settings"}
            ],
        )
    return chosen, risk if risk is not None else stored_risk


def org_plan(
    session: Session,
    only: Sequence[str] | None,
    team: str | None,
    budget: float | None,
    risk: float | None,
) -> tuple[OrgPlan, list[str]]:
    """The plan for the visible pipelines (of ``team``), and the pipelines left out
    because they have no runs yet."""
    chosen, tolerance = _budget(session, budget, risk)
    briefs = pipelines.briefs(session, only=only, owner=team)
    options, missing, key = options_of(session, briefs)
    slot = (tuple(only) if only is not None else None, team, chosen, tolerance)
    found = KEPT_PLAN.get(
        session, (slot, key), lambda: (plan(options, chosen, tolerance), tuple(missing))
    )
    return found[0], list(found[1])
