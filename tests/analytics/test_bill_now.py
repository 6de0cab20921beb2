"""Today's expected bill is one figure (issue 34, "one basis"): the portfolio, /metrics,
the projection at the current cadence and its "today" agree, and all of them follow the
cost series (a trend, a step) rather than the window's plain mean."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from app.analytics.bill_now import current_bill_at_risk, current_monthly_cost, current_monthly_costs
from app.db.engine import Database
from app.db.models import Pipeline
from app.pipelines.service import briefs
from app.planning.cost_series import OrgPrior, fit
from app.planning.schedule import CALENDAR
from app.planning.series_bill import typical_expected_bill
from tests.fixtures.series_runs import post, series_runs, settle

CLEAN = OrgPrior(log_spread=0.0, tail_share=0.0, tail_ratio=1.0, pipelines=10)
WEEKS_PER_MONTH = 52 / 12


def test_a_typical_month_prices_each_retraining_at_its_date() -> None:
    # Twelve weekly costs growing exactly 2% a week from $100 (weeks 0-11, newest on day
    # 77). A typical four-week month at 1/week from day 77 holds retrainings on days 84,
    # 91, 98, 105 (weeks 12-15): 100 x (1.02^12 + ... + 1.02^15) = $522.72. Calendar
    # months at 1/week hold 4.333: N = 5 w.p. 1/3, else 4: 522.72 + 100 x 1.02^16 / 3
    # = 522.72 + 137.28 / 3 = 522.72 + 45.76 = $568.48.
    model = fit(100.0 * 1.02 ** np.arange(12), np.zeros(12), 7.0 * np.arange(12), prior=CLEAN)
    assert typical_expected_bill(model, 1.0, 77.0, "four_week") == pytest.approx(522.72, abs=0.005)
    assert typical_expected_bill(model, 1.0, 77.0, CALENDAR) == pytest.approx(568.48, abs=0.005)
    # Flat $100 a retraining at 2/week, calendar months: 2 x 52/12 x 100 = $866.67.
    flat = fit(np.full(12, 100.0), np.zeros(12), 3.5 * np.arange(12), prior=CLEAN)
    assert typical_expected_bill(flat, 2.0, 40.0, CALENDAR) == pytest.approx(866.67, abs=0.005)


def cadence_at(proj: dict[str, Any], k: float) -> dict[str, Any]:
    return next(c for c in proj["projections"]["baseline"]["cadences"] if c["runs_per_week"] == k)


@pytest.mark.parametrize("shape", ["trend", "step"])
def test_every_place_shows_the_same_expected_bill(
    client: TestClient,
    db: Database,
    ingest_headers: dict[str, str],
    admin_headers: dict[str, str],
    shape: str,
) -> None:
    # trend: 10% a month, $224 a retraining now; step: $300 until six weeks ago, $195
    # since (35% down). Either way the window's plain mean x 8.667 retrainings is not
    # the bill the series forecasts (checked below, so a return to it fails).
    now = datetime.now(UTC)

    def cost(start: datetime, _: int) -> float:
        if shape == "trend":
            return 224.0 * 1.1 ** ((start - now).total_seconds() / 86400 / 30.436875)
        return 195.0 if start > now - timedelta(weeks=6) else 300.0

    runs = series_runs(shape, cost)
    post(client, ingest_headers, runs)
    settle(client, admin_headers, shape, 1800.0)
    proj = client.get(f"/api/v1/pipelines/{shape}/projection?cadences=2").json()
    at_current = cadence_at(proj, 2.0)
    page = at_current["monthly_cost_usd"]
    assert at_current["expected_bill_usd"] == page
    today = proj["projections"]["baseline"]["current_monthly_cost_usd"]
    assert today == pytest.approx(page, rel=1e-9)
    assert at_current["vs_current_ratio"] == pytest.approx(1.0, rel=1e-9)
    portfolio = client.get("/api/v1/portfolio", headers=admin_headers).json()
    [row] = [r for r in portfolio["pipelines"] if r["name"] == shape]
    assert row["monthly_cost_usd"] == pytest.approx(page, rel=1e-9)
    with db.read() as s:
        listed = [b for b in briefs(s) if b.name == shape]
        kept = current_monthly_costs(s, listed)[listed[0].id]
        pipeline = s.query(Pipeline).filter_by(name=shape).one()
        assert current_monthly_cost(s, pipeline) == pytest.approx(kept, rel=1e-9)
        at_risk = current_bill_at_risk(s, pipeline)
    assert kept == pytest.approx(page, rel=1e-9)
    assert at_risk is not None and at_risk[1] == pytest.approx(page, rel=1e-9)
    assert at_risk[0] == pytest.approx(at_current["bill_at_risk_usd"])
    # Not the plain mean: with the trend the series prices later retrainings higher
    # (above the mean of a window centred ~5 weeks back); after the step it forecasts
    # the new level, not a mean still holding the old one.
    costs = [r["price_per_gpu_hour"] * r["workers"] * 10.0 for r in runs]
    plain = 2 * WEEKS_PER_MONTH * math.fsum(costs) / len(costs)
    if shape == "trend":
        assert page > 1.05 * plain
    else:
        assert page < 0.85 * plain
