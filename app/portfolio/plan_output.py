"""The org cadence plan as the API's JSON and as CSV (one row per pipeline)."""

from __future__ import annotations

import csv
import io
import math

from cadence_client.spreadsheet import cell_from_text

from app.planning.org_plan_report import Marginal, OrgPlan
from app.portfolio.plan_schemas import (
    OrgPlanOut,
    PlanRowOut,
    SensitivityOut,
    StepOut,
)

CSV_COLUMNS = (
    "pipeline",
    "today_runs_per_week",
    "proposed_runs_per_week",
    "bill_change_usd",
    "staleness_change_usd",
    "why",
    "needs_evaluations",
    "faster_would_add_usd",
)


def _step(m: Marginal | None) -> StepOut | None:
    if m is None:
        return None
    saving = None if math.isnan(m.saving_usd) else round(m.saving_usd, 2)
    return StepOut(
        budget_usd=m.budget_usd,
        feasible=m.feasible,
        saving_usd=saving,
        moves=list(m.moves),
        sentence=m.sentence,
    )


def plan_out(found: OrgPlan, team: str | None, without_runs: list[str]) -> OrgPlanOut:
    return OrgPlanOut(
        budget_usd=found.budget_usd,
        risk=found.risk,
        team=team,
        feasible=found.feasible,
        sentence=found.sentence,
        expected_bill_usd=round(found.expected_bill_usd, 2),
        bill_p90_usd=round(found.bill_p90_usd, 2),
        p_over_budget=found.p_over_budget,
        today_expected_bill_usd=round(found.today_expected_bill_usd, 2),
        change_usd=round(found.objective_change_usd, 2),
        needed_budget_usd=found.needed_budget_usd,
        next_thousand=_step(found.next_step),
        cut_thousand=_step(found.cut_step),
        sensitivity=[
            SensitivityOut(pipeline=s.name, input=s.what, at_half=s.at_half, at_double=s.at_double)
            for s in found.sensitivity
        ],
        pipelines=[
            PlanRowOut(
                name=r.name,
                today_runs_per_week=r.today,
                proposed_runs_per_week=r.proposed,
                bill_change_usd=round(r.bill_change_usd, 2),
                staleness_change_usd=None
                if r.staleness_change_usd is None
                else round(r.staleness_change_usd, 2),
                why=r.why,
                needs_evaluations=r.needs_evaluations,
                faster_would_add_usd=None
                if r.add_faster_usd is None
                else round(r.add_faster_usd, 2),
            )
            for r in found.rows
        ],
        without_runs=without_runs,
    )


def _cell(value: object) -> str:
    return "" if value is None else cell_from_text(str(value))


def plan_csv(answer: OrgPlanOut) -> str:
    """One row per pipeline, the columns of the page's table."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for r in answer.pipelines:
        row = (
            r.name,
            r.today_runs_per_week,
            r.proposed_runs_per_week,
            r.bill_change_usd,
            r.staleness_change_usd,
            r.why,
            r.needs_evaluations,
            r.faster_would_add_usd,
        )
        writer.writerow([_cell(v) for v in row])
    return out.getvalue()
