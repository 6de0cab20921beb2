"""Per-pipeline business gauges, computed from the database when Prometheus scrapes.

For each pipeline (at most ``MAX_PIPELINES``, by name), in one read-only transaction:

- ``cadence_pipeline_projected_monthly_cost_usd``: the projection that
  ``GET /api/v1/pipelines/{name}/projection?cadences=<runs_per_week>`` gives for the
  pipeline's production variant (calendar months, its newest RUN_WINDOW runs, no
  what-ifs): ``analytics.service.current_monthly_cost``, the overview's figure too;
- ``cadence_pipeline_monthly_budget_usd``: the pipeline's budget (omitted when unset);
- ``cadence_pipeline_weekly_goodput``: overall goodput of the latest ISO week with runs;
- ``cadence_pipeline_weekly_badput_gpu_hours{cause}``: that week's idle GPU-hours by cause;
- ``cadence_alert_deliveries_total{status}``: webhook notifications stored, delivered or
  failed, counted from the database (so every replica reports the same total; deleting
  a rule deletes its deliveries, which Prometheus reads as a counter reset).

A scrape never fails on the database: when it is unreachable the pipeline gauges are
left out and ``cadence_database_up`` is 0.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy.exc import SQLAlchemyError

from app.alerts.service import delivery_counts
from app.analytics.service import current_monthly_cost
from app.analytics.weekly import latest_week
from app.pipelines.service import page
from app.planning.weekly import BADPUT_CAUSES

if TYPE_CHECKING:
    from fastapi import FastAPI

log = logging.getLogger("cadence.observability")

MAX_PIPELINES = 500


class BusinessCollector(Collector):
    def __init__(self, app: FastAPI) -> None:
        self.app = app

    def describe(self) -> Iterable[Metric]:
        return []  # computed at scrape time only; never at registration

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily(
            "cadence_database_up", "1 when the scrape could read the database, else 0."
        )
        cost = GaugeMetricFamily(
            "cadence_pipeline_projected_monthly_cost_usd",
            "Projected monthly cost (USD) at the pipeline's current cadence, production variant.",
            labels=("pipeline",),
        )
        budget = GaugeMetricFamily(
            "cadence_pipeline_monthly_budget_usd",
            "The pipeline's monthly budget (USD); absent when none is set.",
            labels=("pipeline",),
        )
        goodput = GaugeMetricFamily(
            "cadence_pipeline_weekly_goodput",
            "Overall goodput (0..1) of the latest ISO week with runs.",
            labels=("pipeline",),
        )
        badput = GaugeMetricFamily(
            "cadence_pipeline_weekly_badput_gpu_hours",
            "Idle GPU-hours of the latest ISO week with runs, by cause.",
            labels=("pipeline", "cause"),
        )
        deliveries = CounterMetricFamily(
            "cadence_alert_deliveries",
            "Alert webhook notifications stored, by status (delivered or failed).",
            labels=("status",),
        )
        db = getattr(self.app.state, "database", None)
        try:
            if db is None:
                raise RuntimeError("no database yet")
            with db.read() as session:
                pipelines = page(session, limit=MAX_PIPELINES)
                for p in pipelines:
                    if p.monthly_budget_usd is not None:
                        budget.add_metric([p.name], p.monthly_budget_usd)
                    value = current_monthly_cost(session, p)
                    if value is not None:
                        cost.add_metric([p.name], value)
                    week = latest_week(session, p)
                    if week is not None and week.goodput.overall is not None:
                        goodput.add_metric([p.name], week.goodput.overall)
                    if week is not None:
                        for cause in BADPUT_CAUSES:
                            value = week.gpu_hours_by_cause.get(cause, 0.0)
                            badput.add_metric([p.name, cause], value)
                counts = delivery_counts(session)
                for status in ("delivered", "failed"):
                    deliveries.add_metric([status], counts.get(status, 0))
        except (SQLAlchemyError, RuntimeError) as exc:
            log.warning("metrics: database unavailable: %s", str(exc).splitlines()[0][:200])
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield from (up, cost, budget, goodput, badput, deliveries)
