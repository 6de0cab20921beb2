"""Issue 34's scenarios through the API (either database): a trend, an optimization that
landed, and retrainings abandoned after failed attempts. Runs are placed relative to the
clock, since the month to date is read at the clock's time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from fastapi.testclient import TestClient

from app.analytics import costs
from app.db.engine import Database
from app.pipelines.service import briefs
from app.planning.scenario import RUN_WINDOW
from tests.fixtures.series_runs import GAP, HOURS, attempt, post, series_runs, settle


def test_a_trend_reads_at_risk_or_likely_over_and_says_so(
    client: TestClient, ingest_headers: dict[str, str], admin_headers: dict[str, str]
) -> None:
    # Costs grow 10% a month; a retraining started now costs $224 (9 of them in a 31-day
    # month end near the issue's $1,926). Budget $1,800: the forecast follows the trend,
    # so the month reads at_risk or likely_over (before: "within, 0%").
    now = datetime.now(UTC)

    def cost(start: datetime, _: int) -> float:
        return 224.0 * 1.1 ** ((start - now).total_seconds() / 86400 / 30.436875)

    post(client, ingest_headers, series_runs("growing", cost))
    settle(client, admin_headers, "growing", 1800.0)
    proj = client.get("/api/v1/pipelines/growing/projection").json()
    warnings = proj["projections"]["baseline"]["warnings"]
    assert any(
        w.startswith("Costs rose 10% a month over the last 20 retrainings; the forecast follows")
        for w in warnings
    ), warnings
    mtd = proj["month_to_date"]
    assert any("follows the trend" in line for line in mtd["working"])
    month_bill = mtd["expected_end_of_month_usd"]
    if month_bill > 1800 * 0.97:  # a month long enough to hold the bill
        assert mtd["status"] in ("at_risk", "likely_over", "over"), mtd


def test_an_optimization_reads_within_and_says_so(
    client: TestClient, ingest_headers: dict[str, str], admin_headers: dict[str, str]
) -> None:
    # $220 a retraining until six weeks ago, then $143 (35% less): 12 retrainings since,
    # 8 before in the window of 20. Budget $1,400: at most 9 x 143 = $1,287 this month,
    # so "within" (before: "likely over", the window's mean $174 x 8.7 = $1,510).
    change = datetime.now(UTC) - timedelta(weeks=6)

    def cost(start: datetime, _: int) -> float:
        return 220.0 if start < change else 143.0

    post(client, ingest_headers, series_runs("optimized", cost))
    settle(client, admin_headers, "optimized", 1400.0)
    proj = client.get("/api/v1/pipelines/optimized/projection").json()
    warnings = proj["projections"]["baseline"]["warnings"]
    found = [w for w in warnings if w.startswith("Costs fell 35% after a change found")]
    assert found and found[0].endswith("the forecast uses the 12 retrainings since."), warnings
    assert proj["month_to_date"]["status"] == "within", proj["month_to_date"]
    at2 = next(c for c in proj["projections"]["baseline"]["cadences"] if c["runs_per_week"] == 2)
    assert at2["mean_cost_per_run_usd"] == pytest.approx(143.0, rel=0.03)


def test_abandoned_retrainings_stay_in_the_series(
    client: TestClient, db: Database, ingest_headers: dict[str, str], admin_headers: dict[str, str]
) -> None:
    # Eight retrainings at $200 that succeeded first time and two abandoned after two
    # failed attempts of $150 each ($300): a retraining costs (8 x 200 + 2 x 300) / 10 =
    # $220 on average, not $200, in the projection, the month and the org-wide windows.
    start = datetime.now(UTC).replace(microsecond=0) - timedelta(days=40)
    runs = []
    for i in range(10):
        at = start + GAP * i
        if i in (3, 6):
            for a in ("a", "b"):
                failed = {"retraining_id": f"r{i}", "outcome": "failed"}
                runs.append(attempt("gaveup", f"r{i}-{a}", at, 150.0, **failed))
                at += timedelta(hours=HOURS + 1)
        else:
            runs.append(attempt("gaveup", f"r{i}", at, 200.0))
    post(client, ingest_headers, runs)
    settle(client, admin_headers, "gaveup", 5000.0)
    proj = client.get("/api/v1/pipelines/gaveup/projection").json()
    at2 = next(c for c in proj["projections"]["baseline"]["cadences"] if c["runs_per_week"] == 2)
    assert at2["mean_cost_per_run_usd"] == pytest.approx(220.0)
    with db.read() as s:
        listed = [p for p in briefs(s) if p.name == "gaveup"]
        (window,) = costs.windows(s, listed, RUN_WINDOW).values()
        assert len(window) == 10 and [c for c, _, _ in window].count(300.0) == 2
        assert sum(c for c, _, _ in window) / len(window) == pytest.approx(220.0)


def test_the_page_says_what_the_forecast_follows(
    client: TestClient, ingest_headers: dict[str, str], admin_headers: dict[str, str]
) -> None:
    # The optimization above, on the pipeline page: the same sentence as the API's.
    change = datetime.now(UTC) - timedelta(weeks=6)
    post(client, ingest_headers, series_runs("cut", lambda s, _: 220.0 if s < change else 143.0))
    settle(client, admin_headers, "cut", 1400.0)
    warnings = client.get("/api/v1/pipelines/cut/projection").json()["projections"]["baseline"]
    sentence = next(w for w in warnings["warnings"] if w.startswith("Costs fell 35%"))
    html = client.get("/pipelines/cut").text
    words = html[html.index('data-testid="forecast-words"') :]
    assert f"<li>{sentence}</li>" in words[: words.index("</section>")]


def test_a_declared_change_starts_the_window(
    client: TestClient, ingest_headers: dict[str, str], admin_headers: dict[str, str]
) -> None:
    # $200 a retraining, then a declared change five retrainings ago (3.5 days apart) and
    # $130 since: the forecast uses the 5 since, at $130 (not the window's mean $186).
    runs = series_runs("noted", lambda s, i: 200.0 if i < 15 else 130.0)
    post(client, ingest_headers, runs)
    settle(client, admin_headers, "noted", 5000.0)
    at = datetime.fromisoformat(runs[15]["started_at"]) - timedelta(hours=1)
    note = {"at": at.isoformat(), "description": "smaller batch"}
    r = client.post("/api/v1/pipelines/noted/changes", json=note, headers=admin_headers)
    assert r.status_code in (200, 201), r.text
    proj = client.get("/api/v1/pipelines/noted/projection").json()
    warnings = proj["projections"]["baseline"]["warnings"]
    day = f"{at:%b} {at.day}"
    # 1 - 130/200 = 35%, read from the medians of the wobbled costs: 35% or 36%.
    said = f"% after the change on {day}; the forecast uses the 5 retrainings since."
    assert any(w.startswith("Costs fell 3") and w.endswith(said) for w in warnings), warnings
    at2 = next(c for c in proj["projections"]["baseline"]["cadences"] if c["runs_per_week"] == 2)
    assert at2["mean_cost_per_run_usd"] == pytest.approx(130.0, rel=0.03)
