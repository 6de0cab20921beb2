"""Per-pipeline business gauges, read from the rollups when Prometheus scrapes.

For every pipeline (none is left out), in one read-only transaction of four queries:

- ``cadence_pipeline_projected_monthly_cost_usd``: the monthly cost at the pipeline's
  current cadence from the production variant (what
  :func:`app.analytics.service.current_monthly_cost` gives): the median cost of the
  variant's newest RUN_WINDOW runs, for all pipelines in one LATERAL query;
- ``cadence_pipeline_monthly_budget_usd``: the pipeline's budget (omitted when unset);
- ``cadence_pipeline_weekly_goodput``: overall goodput of the latest ISO week with runs,
  from ``run_rollup``;
- ``cadence_pipelines``: how many pipelines there are, so a dashboard can check that
  every one has its gauges.

A scrape never fails on the database: when it is unreachable the pipeline gauges are
left out and ``cadence_database_up`` is 0.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy import func, select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from app.analytics import repository as repo
from app.db.models import Pipeline
from app.planning.goodput import goodput_from_totals
from app.planning.projection import monthly_cost_now
from app.planning.scenario import RUN_WINDOW
from app.rollups import repository as rollups

if TYPE_CHECKING:
    from fastapi import FastAPI

log = logging.getLogger("cadence.observability")


def gauges(session: Session) -> Iterator[tuple[str, str, float]]:
    """(gauge, pipeline name, value) for every pipeline, by name."""
    pipelines = session.execute(
        select(
            Pipeline.id,
            Pipeline.name,
            Pipeline.monthly_budget_usd,
            Pipeline.runs_per_week,
            Pipeline.production_variant,
        ).order_by(Pipeline.name)
    ).all()
    current = {pid: variant for pid, _, _, _, variant in pipelines}
    medians = repo.median_costs(session, current, RUN_WINDOW)
    weeks = rollups.latest_weeks(session)
    for pid, name, budget, cadence, _ in pipelines:
        if budget is not None:
            yield "budget", name, budget
        if pid in medians:
            yield "cost", name, monthly_cost_now(medians[pid], cadence)
        overall = goodput_from_totals(weeks[pid].goodput).overall if pid in weeks else None
        if overall is not None:
            yield "goodput", name, overall


class BusinessCollector(Collector):
    def __init__(self, app: FastAPI) -> None:
        self.app = app

    def describe(self) -> Iterable[Metric]:
        return []  # computed at scrape time only; never at registration

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily(
            "cadence_database_up", "1 when the scrape could read the database, else 0."
        )
        families = {
            "cost": GaugeMetricFamily(
                "cadence_pipeline_projected_monthly_cost_usd",
                "Projected monthly cost (USD) at the pipeline's current cadence, default variant.",
                labels=("pipeline",),
            ),
            "budget": GaugeMetricFamily(
                "cadence_pipeline_monthly_budget_usd",
                "The pipeline's monthly budget (USD); absent when none is set.",
                labels=("pipeline",),
            ),
            "goodput": GaugeMetricFamily(
                "cadence_pipeline_weekly_goodput",
                "Overall goodput (0..1) of the latest ISO week with runs.",
                labels=("pipeline",),
            ),
        }
        count = GaugeMetricFamily("cadence_pipelines", "Pipelines in the database.")
        db = getattr(self.app.state, "database", None)
        try:
            if db is None:
                raise RuntimeError("no database yet")
            with db.transaction(write=False) as session:
                for gauge, name, value in gauges(session):
                    families[gauge].add_metric([name], value)
                total = session.scalar(select(func.count()).select_from(Pipeline)) or 0
        except (SQLAlchemyError, RuntimeError) as exc:
            log.warning("metrics: database unavailable: %s", str(exc).splitlines()[0][:200])
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        count.add_metric([], total)
        yield from (up, count, *families.values())
