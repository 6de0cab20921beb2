"""Per-pipeline business gauges, read from the rollups when Prometheus scrapes.

For every pipeline (none is left out), in one read-only transaction; the weeks, costs and
month to date are kept between scrapes while the pipelines' runs are unchanged
(``analytics.org_weeks``, ``analytics.costs``, ``analytics.month``), so a warm scrape
reads the pipelines, their change counters and the delivery counts:

- ``cadence_pipeline_expected_bill_usd``: the expected bill of a typical month that
  ``GET /api/v1/pipelines/{name}/projection?cadences=<runs_per_week>`` gives for the
  pipeline's production variant (calendar months, its newest RUN_WINDOW runs, no
  what-ifs): ``analytics.bill_now``, today's expected bill, the overview's and the
  portfolio's figure too (the typical month from today, priced by the cost series).
  ``cadence_pipeline_projected_monthly_cost_usd``, its old name, is exported beside it
  for one release, marked deprecated in its HELP;
- ``cadence_pipeline_monthly_budget_usd``: the pipeline's budget (omitted when unset);
- ``cadence_pipeline_weekly_goodput{week}``: overall goodput of the last complete ISO week
  (UTC; the week the review and the overview show), from ``run_rollup`` (the review's
  kept window); absent for a pipeline with no runs that week;
- ``cadence_pipeline_weekly_badput_gpu_seconds{cause,week}``: that week's idle GPU-time by
  cause;
- ``cadence_alert_deliveries_total{status}``: webhook notifications stored, delivered or
  failed, counted from the database (so every replica reports the same total; deleting
  a rule deletes its deliveries, which Prometheus reads as a counter reset);
- ``cadence_pipelines``: how many pipelines there are, so a dashboard can check that
  every one has its gauges.

Above ``CADENCE_METRICS_PIPELINE_LIMIT`` pipelines (1,000) the same gauges are exported per
team instead (``cadence_team_*{team}``, the team being the pipeline's owner), plus
``cadence_team_pipelines``: 5,000 pipelines' gauges are about a megabyte per scrape.

A scrape never fails on the database: when it is unreachable the pipeline gauges are
left out and ``cadence_database_up`` is 0.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from datetime import date
from typing import TYPE_CHECKING

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from app.alerts.service import delivery_counts
from app.analytics.bill_now import current_monthly_costs
from app.analytics.month import months
from app.analytics.org_weeks import org_window
from app.db.base import utcnow
from app.pipelines import service as pipelines_service
from app.planning.causes import BADPUT_CAUSES
from app.planning.weekly import iso_week, last_complete_week

if TYPE_CHECKING:
    from fastapi import FastAPI

SECONDS_PER_HOUR = 3600.0  # Prometheus names time in seconds (promtool's lint)
log = logging.getLogger("cadence.observability")


def gauges(session: Session, monday: date) -> Iterator[tuple[str, str, str, float]]:
    """(gauge, pipeline name, team, value) for every pipeline, by name; the team is the
    pipeline's owner ("unassigned" when empty). Weekly gauges are for the ISO week of
    ``monday``."""
    pipelines = pipelines_service.briefs(session)
    costs = current_monthly_costs(session, pipelines)
    production = {p.id: p.production_variant for p in pipelines}
    weeks = org_window(session, list(production), monday, production)  # the review's, kept
    this_month = months(session, pipelines)
    for p in pipelines:
        team = p.owner or "unassigned"
        if p.monthly_budget_usd is not None:
            yield "budget", p.name, team, p.monthly_budget_usd
        if p.id in costs:
            yield "cost", p.name, team, costs[p.id]
            yield "cost_deprecated", p.name, team, costs[p.id]
        mtd = this_month[p.id]
        yield "month_spend", p.name, team, mtd.spend_to_date_usd
        yield "month_expected", p.name, team, mtd.expected_end_of_month_usd
        if mtd.status is not None:  # 1 for this month's word (the pages' and the API's)
            yield f"status:{mtd.status.value}", p.name, team, 1.0
        week = weeks.summary(p.id, monday)
        if week.runs == 0:
            continue
        overall = week.goodput.overall
        if overall is not None:
            yield "goodput", p.name, team, overall
        for cause in BADPUT_CAUSES:
            idle = week.gpu_hours_by_cause.get(cause, 0.0)
            yield f"badput:{cause}", p.name, team, idle * SECONDS_PER_HOUR  # base unit


def by_team(rows: Iterable[tuple[str, str, str, float]]) -> dict[tuple[str, str], float]:
    """Per-team gauges from per-pipeline ones: cost and budget are sums, goodput the mean
    over the team's pipelines that have one, and ``pipelines`` counts each pipeline once
    (a pipeline with no gauge at all, no runs and no budget, is not counted).

    Example: team a with costs 100 and 50 and goodputs 0.5 and 0.7 -> cost 150, goodput
    0.6, pipelines 2.
    """
    sums: dict[tuple[str, str], float] = {}
    counts: dict[tuple[str, str], int] = {}
    seen: set[str] = set()
    for gauge, name, team, value in rows:
        sums[gauge, team] = sums.get((gauge, team), 0.0) + value
        counts[gauge, team] = counts.get((gauge, team), 0) + 1
        if name not in seen:
            seen.add(name)
            sums["pipelines", team] = sums.get(("pipelines", team), 0.0) + 1
    return {k: v / counts[k] if k[0] == "goodput" else v for k, v in sums.items()}


class BusinessCollector(Collector):
    def __init__(self, app: FastAPI) -> None:
        self.app = app

    def describe(self) -> Iterable[Metric]:
        return []  # computed at scrape time only; never at registration

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily(
            "cadence_database_up", "1 when the scrape could read the database, else 0."
        )
        count = GaugeMetricFamily("cadence_pipelines", "Pipelines in the database.")
        deliveries = CounterMetricFamily(
            "cadence_alert_deliveries",
            "Alert webhook notifications stored, by status (delivered or failed).",
            labels=("status",),
        )
        db = getattr(self.app.state, "database", None)
        limit = self.app.state.settings.metrics_pipeline_limit
        try:
            if db is None:
                raise RuntimeError("no database yet")
            with db.read() as session:
                total = pipelines_service.count(session)
                per_team = total > limit
                families = _families("team" if per_team else "pipeline")
                monday = last_complete_week(utcnow().date())
                week = iso_week(monday)
                rows = gauges(session, monday)
                pairs = (
                    sorted(by_team(rows).items())
                    if per_team
                    else (((gauge, name), value) for gauge, name, _, value in rows)
                )
                for (gauge, label), value in pairs:
                    kind, _, cause = gauge.partition(":")
                    labels = [label, cause] if cause else [label]
                    weekly = kind in ("goodput", "badput")
                    families[kind].add_metric([*labels, week] if weekly else labels, value)
                counts = delivery_counts(session)
                for status in ("delivered", "failed"):
                    deliveries.add_metric([status], counts.get(status, 0))
        except (SQLAlchemyError, RuntimeError) as exc:
            log.warning("metrics: database unavailable: %s", str(exc).splitlines()[0][:200])
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        count.add_metric([], total)
        yield from (up, count, *families.values(), deliveries)


def _families(level: str) -> dict[str, GaugeMetricFamily]:
    """The business gauges, per pipeline or (above CADENCE_METRICS_PIPELINE_LIMIT) per team."""
    each = "the pipeline's" if level == "pipeline" else "summed over the team's pipelines:"
    families = {
        "cost": GaugeMetricFamily(
            f"cadence_{level}_expected_bill_usd",
            f"Expected bill (USD) of a typical month at the current cadence, production "
            f"variant; {each}.",
            labels=(level,),
        ),
        "cost_deprecated": GaugeMetricFamily(
            f"cadence_{level}_projected_monthly_cost_usd",
            f"DEPRECATED (removed in the next release): use cadence_{level}_expected_bill_usd, "
            "the same figure.",
            labels=(level,),
        ),
        "budget": GaugeMetricFamily(
            f"cadence_{level}_monthly_budget_usd",
            f"Monthly budget (USD), {each}; absent when none is set.",
            labels=(level,),
        ),
        "goodput": GaugeMetricFamily(
            f"cadence_{level}_weekly_goodput",
            "Overall goodput (0..1) of the last complete ISO week (UTC, the week label)"
            + ("." if level == "pipeline" else "; the mean over the team's pipelines."),
            labels=(level, "week"),
        ),
    }
    families["month_spend"] = GaugeMetricFamily(
        f"cadence_{level}_month_to_date_usd",
        f"Spent this calendar month (UTC) by every variant, experiments included; {each}.",
        labels=(level,),
    )
    families["month_expected"] = GaugeMetricFamily(
        f"cadence_{level}_expected_end_of_month_usd",
        f"This month's expected bill: spent so far plus the retrainings still to start; {each}.",
        labels=(level,),
    )
    families["status"] = GaugeMetricFamily(
        f"cadence_{level}_budget_status",
        "1 for this month's budget status (over, likely_over, at_risk, within), the word "
        "the pages and the API show"
        + ("." if level == "pipeline" else "; per team, how many pipelines have it."),
        labels=(level, "status"),
    )
    families["badput"] = GaugeMetricFamily(
        f"cadence_{level}_weekly_badput_gpu_seconds",
        "Idle GPU-seconds (GPU-hours x 3600, Prometheus's base unit) of the last complete "
        f"ISO week (UTC), by cause; {each}.",
        labels=(level, "cause", "week"),
    )
    if level == "team":
        families["pipelines"] = GaugeMetricFamily(
            "cadence_team_pipelines", "Pipelines owned by the team.", labels=("team",)
        )
    return families
