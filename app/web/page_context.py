"""The pipeline page's one typed context: what every section of ``GET /pipelines/{name}``
(and of its what-if re-render) is computed from, read once per request.

The pipeline and its parsed scenario are read once; the runs are read twice (the
variants' statistics, then every window in one statement, ``app.analytics.reads``), the
evaluations once, the weeks and this month's spend once (``analytics.weekly.page_weeks``)
and the bill once. The windows and the weeks are kept between requests while the
pipeline's runs and settings are unchanged (:func:`kept_reads`). Each section in
``views`` and ``value_view`` is a function of this object and reads nothing itself.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime

from sqlalchemy.orm import Session

from app.analytics import month, weekly
from app.analytics.reads import RunReads, change_count, read_runs
from app.billing import service as billing
from app.billing.schemas import ReconciliationOut
from app.db.engine import status_thresholds_of
from app.db.kept import KeptMap
from app.db.models import Pipeline
from app.evaluations.service import quality_points
from app.pipelines.notes import ChangePoint, change_points
from app.pipelines.service import get_by_name, settings_key
from app.planning.budget_status import DEFAULT_RISK_TOLERANCE
from app.planning.decay import QualityPoint
from app.planning.month_to_date import MonthToDate
from app.planning.scenario import Scenario
from app.planning.weekly import monday_of

# The page's reads by (pipeline id, the gate's variants) while its change count, settings,
# week and month are as read.
KEPT_PAGE: KeptMap[tuple[int, str | None, str | None], tuple[RunReads, weekly.PageWeeks]] = KeptMap(
    "page_reads"
)

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


@dataclass(frozen=True)
class PipelinePageContext:
    pipeline: Pipeline
    scenario: Scenario  # as asked, at the bill's price with ``price_from=bill``
    gate: GateParams  # with the pipeline's quality margin where the page gave none
    runs: RunReads
    quality: list[QualityPoint]  # the serving model's evaluations (age, value)
    weeks: weekly.PageWeeks  # the goodput trend and this month's spend by variant
    month_to_date: MonthToDate | None  # None: the pipeline has no runs
    bill: ReconciliationOut  # the newest billed month's reconciliation
    price_note: str | None  # the words for a price taken from the bill
    query: dict[str, str]
    # P(bill > budget) below which a plan fits: the one test of every budget word.
    risk_tolerance: float = DEFAULT_RISK_TOLERANCE
    changes: tuple[ChangePoint, ...] = ()  # declared changes and price changes, oldest first

    @property
    def target(self) -> float:
        """The scenario's runs per week (the pipeline's cadence unless asked otherwise)."""
        return self.scenario.target(self.pipeline.runs_per_week)


def bill_priced(
    p: Scenario, bill: ReconciliationOut, source: str | None
) -> tuple[Scenario, str | None]:
    """``price_from=bill``: the scenario at the bill's effective price per GPU-hour for the
    newest billed month, and the words that say so (docs/finops.md)."""
    if source != "bill":
        return p, None
    price = bill.effective_price_per_gpu_hour
    if price is None:
        return p, f"price: no bill line for this pipeline in {bill.month}, so as recorded"
    return replace(
        p, price=round(price, 4)
    ), f"price: from the bill, ${price:,.2f}, as of {bill.month}"


def with_pipeline_defaults(g: GateParams, pipeline: Pipeline) -> GateParams:
    """The gate's settings with the pipeline's quality margin where the page gave none,
    so the form shows the margin in force."""
    if g.quality_margin is not None:
        return g
    return replace(g, quality_margin=pipeline.quality_margin)


def build(
    session: Session,
    name: str,
    scenario: Scenario,
    gate: GateParams,
    query: dict[str, str],
    now: datetime | None = None,
) -> PipelinePageContext:
    """Read everything the page's sections need, once."""
    now = now or datetime.now(UTC)
    pipeline = get_by_name(session, name)
    bill = billing.pipeline_reconciliation(session, pipeline.name, None)
    priced, price_note = bill_priced(scenario, bill, query.get("price_from"))
    g = with_pipeline_defaults(gate, pipeline)
    runs, weeks = kept_reads(session, pipeline, g, now)
    return PipelinePageContext(
        pipeline=pipeline,
        scenario=priced,
        gate=g,
        runs=runs,
        quality=quality_points(session, pipeline),
        weeks=weeks,
        month_to_date=_page_month(session, pipeline, runs, weeks, now),
        bill=bill,
        price_note=price_note,
        query=query,
        risk_tolerance=status_thresholds_of(session).risk_tolerance,
        changes=tuple(change_points(session, pipeline)),
    )


def kept_reads(
    session: Session, pipeline: Pipeline, g: GateParams, now: datetime
) -> tuple[RunReads, weekly.PageWeeks]:
    """The page's reads of the runs (the windows, the weeks and this month's spend), kept
    between requests while the pipeline's change count, its settings, the gate's variants,
    the week and the month are the same: a warm page reads only the variant statistics
    (which carry the change count, read before anything filed under it)."""
    version = (
        change_count(session, pipeline),
        settings_key(pipeline),
        monday_of(now.date()),
        month.month_of(now),
    )

    def read() -> tuple[RunReads, weekly.PageWeeks]:
        runs = read_runs(session, pipeline, (g.baseline, g.candidate), recent=CHART_RUNS)
        return runs, weekly.page_weeks(session, pipeline, runs.latest_start, TREND_WEEKS, now)

    return KEPT_PAGE.get(session, ((pipeline.id, g.baseline, g.candidate), version), read)


def _page_month(
    session: Session,
    pipeline: Pipeline,
    runs: RunReads,
    weeks: weekly.PageWeeks,
    now: datetime,
) -> MonthToDate | None:
    """This month so far, as ``analytics.month.months`` has it, from what the page read:
    the production variant's window of retraining costs and its newest start."""
    if not runs.variants:
        return None
    production = pipeline.production_variant
    started = next((v.last_started_at for v in runs.variants if v.variant == production), None)
    series, declared = runs.series(production), runs.latest_change
    return month.month_to_date_of(
        session, pipeline, weeks.month_spend, series, declared, started, now
    )
