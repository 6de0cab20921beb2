"""More demo pipelines, so the organisation's cadence plan has something to say
(``cadence demo`` loads them after app/demo.py's two; the test fixtures load only those).

- ``search-embedder`` (ranking-team): weekly, 16 workers x ~10 h at $2.50/GPU-h (~$400 a
  retraining), an embedding whose recall@20 loses 0.02 a week, worth $500,000 a month
  per unit: staleness $5,000 a month weekly against $2,500 twice weekly, more than the
  extra ~$1,730 of bill, so the plan moves it to twice weekly when the budget allows.
- ``churn-scorer`` (growth-team): weekly, 4 workers x ~5 h at $2 (~$40), AUC loses 0.002
  a week, worth $20,000: every other week saves ~$87 of bill for $20 of staleness. Only
  six evaluations: the plan calls its curve thin and re-solves at half and double.
- ``ads-ctr`` (ads-team): twice weekly, 8 x ~6 h at $2.20; no evaluations.
- ``demand-forecast`` (supply-team): weekly, 2 x ~3 h at $1.80; no evaluations.

Seeded, placed relative to the last complete ISO week like app/demo.py's runs.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta

from app.db.engine import WriteSession
from app.demo import _run
from app.evaluations.schemas import EvaluationIn
from app.evaluations.service import ingest as ingest_evaluations
from app.pipelines.schemas import PipelineUpdate
from app.pipelines.service import upsert
from app.portfolio.plan import org_budget, set_org_budget
from app.runs.flows import store_runs
from app.runs.schemas import RunIn
from app.runs.service import run_count
from app.settings import get_settings

ORG_BUDGET_USD = 7000.0  # enough for the embedder's move; $6,000 holds it back


def _spec(
    display: str, owner: str, price: float, per_week: float, metric: str, value: float | None
) -> PipelineUpdate:
    return PipelineUpdate(
        display_name=display,
        owner=owner,
        price_per_gpu_hour=price,
        runs_per_week=per_week,
        quality_metric=metric,
        higher_is_better=True,
        quality_value_usd_per_unit_month=value,
    )


# name: (settings, workers, hours, utilization, seed, decay a week or None)
# A table laid out by hand: each pipeline's settings, then its numbers on one line.
PIPELINES: dict[str, tuple[PipelineUpdate, int, float, float, int, float | None]] = {
    "search-embedder": (
        _spec("Search embedder", "ranking-team", 2.5, 1.0, "recall@20", 500_000.0),
        16, 10.0, 0.6, 101, 0.02,
    ),
    "churn-scorer": (
        _spec("Churn scorer", "growth-team", 2.0, 1.0, "auc", 20_000.0),
        4, 5.0, 0.7, 102, 0.002,
    ),
    "ads-ctr": (
        _spec("Ads CTR", "ads-team", 2.2, 2.0, "auc", None),
        8, 6.0, 0.5, 103, None,
    ),
    "demand-forecast": (
        _spec("Demand forecast", "supply-team", 1.8, 1.0, "mape", None),
        2, 3.0, 0.5, 104, None,
    ),
}  # fmt: skip


def runs_of(name: str, anchor: datetime) -> list[RunIn]:
    """Eight weeks of the pipeline's retrainings at its cadence, oldest first."""
    spec, workers, hours, util, seed, decay = PIPELINES[name]
    rng = random.Random(seed)
    per_week = int(spec.runs_per_week or 1)
    out = []
    for n in range(8 * per_week):
        week, slot = divmod(n, per_week)
        start = anchor - timedelta(weeks=7 - week) + timedelta(days=3 * slot, hours=3)
        h = rng.gauss(hours, hours * 0.03)
        out.append(
            _run(
                name,
                f"run-{n + 1:03d}",
                "baseline",
                start,
                h,
                workers,
                min(0.95, max(0.2, rng.gauss(util, 0.02))),
                stall=h * 0.1,
                checkpoint=h * 0.03,
                wait=rng.uniform(0.0, 0.3),
                quality=None if decay is None else 0.8,
                mfu=None,
                interruptions=[],
                metric=spec.quality_metric or "quality",
                tags={},
            )
        )
    return out


THIN = {"churn-scorer": 2}  # evaluates only its newest models: a thin value curve


def evaluations_of(name: str, runs: list[RunIn], now: datetime) -> list[EvaluationIn]:
    """Daily evaluations of each model while it served, losing ``decay`` a week (a thin
    pipeline: every third day of its newest two models only)."""
    decay = PIPELINES[name][5]
    if decay is None:
        return []
    rng = random.Random(PIPELINES[name][4] + 1000)
    days = range(0, 7, 3) if name in THIN else range(7)
    out = []
    for run in runs[-THIN[name] :] if name in THIN else runs:
        if run.finished_at is None:  # (the demo's runs have all finished)
            continue
        for day in days:
            at = run.finished_at + timedelta(days=day + 0.5)
            if at > now:
                break
            value = 0.8 - decay * (day + 0.5) / 7 + rng.gauss(0, decay / 20)
            out.append(EvaluationIn(run_id=run.run_id, evaluated_at=at, value=round(value, 6)))
    return out


def load_portfolio_demo(session: WriteSession, anchor: datetime, now: datetime) -> list[str]:
    """Load the pipelines above (those without runs) and, if none is set, the org
    budget; the names loaded, with their run counts."""
    settings = get_settings()
    loaded = []
    for name, (spec, *_) in PIPELINES.items():
        pipeline = upsert(session, name, spec, settings)
        if run_count(session, pipeline.id):
            continue
        runs = runs_of(name, anchor)
        store_runs(session, runs, token=None, settings=settings, batch=True)
        found = evaluations_of(name, runs, now)
        if found:
            ingest_evaluations(session, name, found, token=None)
        loaded.append(f"{name} ({len(runs)} runs)")
    if loaded and org_budget(session)[0] is None:
        set_org_budget(session, ORG_BUDGET_USD, 0.1, by="demo")
    return loaded
