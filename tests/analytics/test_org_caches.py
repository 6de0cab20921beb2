"""What org-wide pages keep between requests (the median costs, the twelve-week window,
the overview cards) is reused while a pipeline's runs and settings are unchanged, read
again as soon as they change, and always equal to a computation from scratch."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from app.analytics import costs, org_weeks
from app.analytics import repository as analytics_repo
from app.analytics.bill_now import current_monthly_cost, current_monthly_costs
from app.db import rollup_reads
from app.db.engine import Database
from app.db.models import Pipeline
from app.pipelines.service import briefs
from app.planning.weekly import fill_weeks
from tests.fixtures.builders import make_run, make_token

LAST = date(2026, 11, 23)  # a Monday: the window is the 12 weeks ending with its week


def at(name: str, i: int, day: date, variant: str = "baseline", **kw: Any) -> dict[str, Any]:
    start = datetime(day.year, day.month, day.day, 6, tzinfo=UTC)
    return make_run(
        pipeline=name,
        run_id=f"{name}-{variant}-{i}",
        variant=variant,
        started_at=start.isoformat(),
        finished_at=(start + timedelta(hours=8 + i % 5)).isoformat(),
        gpu_utilization=0.3 + 0.05 * (i % 7),
        **kw,
    )


@pytest.fixture
def headers(db: Database) -> dict[str, str]:
    return {"Authorization": f"Bearer {make_token(db, 'ingest read admin', 'kept')}"}


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, list[Any]]]:
    """The pipelines each uncached read was asked for (None: every pipeline)."""
    seen: dict[str, list[Any]] = {"medians": [], "window": []}
    medians, window = analytics_repo.recent_costs, rollup_reads.window_rows

    def count_medians(session: Any, variants: dict[int, str], limit: int) -> dict[int, float]:
        seen["medians"].append(sorted(variants))
        return medians(session, variants, limit)

    def count_window(session: Any, since: date, until: date, ids: Any) -> Any:
        seen["window"].append(None if ids is None else sorted(ids))
        return window(session, since, until, ids)

    monkeypatch.setattr(analytics_repo, "recent_costs", count_medians)
    monkeypatch.setattr(rollup_reads, "window_rows", count_window)
    yield seen


def post(client: TestClient, headers: dict[str, str], runs: list[dict[str, Any]]) -> None:
    r = client.post("/api/v1/runs/batch", json={"runs": runs}, headers=headers)
    assert r.status_code in (200, 201), r.text


def seed(client: TestClient, headers: dict[str, str]) -> None:
    runs = [at("kept-a", i, LAST - timedelta(days=3 * i)) for i in range(8)]
    runs += [at("kept-b", i, LAST - timedelta(days=5 * i), workers=4) for i in range(6)]
    runs += [at("kept-b", i, LAST - timedelta(days=2 * i), "candidate") for i in range(3)]
    post(client, headers, runs)


def ids(db: Database) -> dict[str, int]:
    with db.read() as s:
        return {p.name: p.id for p in s.scalars(select(Pipeline))}


def check_costs(db: Database) -> dict[int, float]:
    """The kept costs equal each pipeline's own projection (no cache on that path)."""
    with db.read() as s:
        listed = briefs(s)
        got = current_monthly_costs(s, listed)
        for p in s.scalars(select(Pipeline)):
            expected = current_monthly_cost(s, p)
            assert (p.id in got) == (expected is not None)
            if expected is not None:
                assert got[p.id] == pytest.approx(expected, rel=1e-9)
    return got


def test_median_costs_are_reused_until_runs_price_or_variant_change(
    client: TestClient, db: Database, headers: dict[str, str], calls: dict[str, list[Any]]
) -> None:
    seed(client, headers)
    pid = ids(db)
    first = check_costs(db)
    assert calls["medians"] == [sorted(pid.values())]  # cold: both pipelines
    assert check_costs(db) == first
    assert len(calls["medians"]) == 1  # nothing changed: nothing read

    # A run of another variant leaves kept-b's production median alone.
    post(client, headers, [at("kept-b", 9, LAST, "candidate")])
    check_costs(db)
    assert len(calls["medians"]) == 1
    # A new production run of kept-a: only kept-a is read again.
    post(client, headers, [at("kept-a", 20, LAST + timedelta(days=1), workers=16)])
    check_costs(db)
    assert calls["medians"][-1] == [pid["kept-a"]]
    # A price change re-prices runs without a price of their own.
    r = client.put("/api/v1/pipelines/kept-b", json={"price_per_gpu_hour": 7.5}, headers=headers)
    assert r.status_code == 200, r.text
    check_costs(db)
    assert calls["medians"][-1] == [pid["kept-b"]]
    # Another production variant.
    r = client.put(
        "/api/v1/pipelines/kept-b", json={"production_variant": "candidate"}, headers=headers
    )
    assert r.status_code == 200, r.text
    check_costs(db)
    assert calls["medians"][-1] == [pid["kept-b"]]
    # A delete.
    listed = client.get("/api/v1/runs?pipeline=kept-a&limit=5", headers=headers).json()["runs"]
    assert client.delete(f"/api/v1/runs/{listed[0]['id']}", headers=headers).status_code == 204
    check_costs(db)
    assert calls["medians"][-1] == [pid["kept-a"]]


def check_window(db: Database) -> org_weeks.OrgWindow:
    """The kept window equals the rollup rows read directly, week by week."""
    first, until = LAST - timedelta(weeks=11), LAST + timedelta(weeks=1)
    with db.read() as s:
        pipelines = list(s.scalars(select(Pipeline)))
        window = org_weeks.org_window(s, [p.id for p in pipelines], LAST)
        direct = rollup_reads.weekly_totals(s, first, until)
        together = rollup_reads.weekly_totals(s, first, until, only=None).get(0, [])
        # Goodput is the production variant's (the raw runs' GROUP BY of that variant).
        since = datetime(first.year, first.month, first.day, tzinfo=UTC)
        production = {
            p.id: analytics_repo.weekly_totals(
                s, p.id, since, since + timedelta(weeks=12), p.production_variant
            ).get(p.id, [])
            for p in pipelines
        }
        for month in (date(2026, 10, 1), date(2026, 11, 1)):
            spent = rollup_reads.month_spend(s, month, until, None)
            for p in pipelines:
                assert window.month_usd(p.id, month) == pytest.approx(spent.get(p.id, 0.0))
    for p in pipelines:
        wanted = fill_weeks(production[p.id], first, LAST)
        for want, prod in zip(fill_weeks(direct.get(p.id, []), first, LAST), wanted, strict=True):
            got = window.summary(p.id, want.week_start)
            assert got.runs == want.runs
            assert got.goodput.overall == pytest.approx(prod.goodput.overall)
            assert got.cost_usd == pytest.approx(want.cost_usd)
            for cause, usd in want.usd_by_cause.items():
                assert got.usd_by_cause[cause] == pytest.approx(usd, abs=1e-9), cause
    summed = fill_weeks(together, first, LAST)
    # The review's trend: the twelve weeks ending with LAST's, every pipeline summed.
    assert len(window.together()) == org_weeks.WINDOW_WEEKS == 12
    assert window.together()[-1].week == "2026-W48" and window.together()[0].week == "2026-W37"
    assert [w.runs for w in window.together()] == [w.runs for w in summed]
    assert [w.cost_usd for w in window.together()] == pytest.approx([w.cost_usd for w in summed])
    return window


def test_the_window_is_read_again_only_for_pipelines_whose_runs_changed(
    client: TestClient, db: Database, headers: dict[str, str], calls: dict[str, list[Any]]
) -> None:
    seed(client, headers)
    pid = ids(db)
    check_window(db)
    assert calls["window"] == [sorted(pid.values())]
    check_window(db)
    assert len(calls["window"]) == 1
    post(client, headers, [at("kept-b", 30, LAST + timedelta(days=2), "candidate")])
    window = check_window(db)
    assert calls["window"][-1] == [pid["kept-b"]]
    # Week of LAST: baseline day 0 and candidate day 0 seeded, and this one.
    assert window.summary(pid["kept-b"], LAST).runs == 3
    # A price change does not touch recorded spend: nothing to read again.
    r = client.put("/api/v1/pipelines/kept-a", json={"price_per_gpu_hour": 9.0}, headers=headers)
    assert r.status_code == 200, r.text
    check_window(db)
    assert len(calls["window"]) == 2
    listed = client.get("/api/v1/runs?pipeline=kept-a&limit=1", headers=headers).json()["runs"]
    assert client.delete(f"/api/v1/runs/{listed[0]['id']}", headers=headers).status_code == 204
    check_window(db)
    assert calls["window"][-1] == [pid["kept-a"]]
    # Goodput is the production variant's: a new production variant reads kept-b again.
    body = {"production_variant": "candidate"}
    assert client.put("/api/v1/pipelines/kept-b", json=body, headers=headers).status_code == 200
    check_window(db)
    assert calls["window"][-1] == [pid["kept-b"]]


def test_a_session_without_the_database_caches_keeps_nothing(
    client: TestClient, db: Database, headers: dict[str, str], calls: dict[str, list[Any]]
) -> None:
    seed(client, headers)
    with db.read() as s:
        listed = briefs(s)
        s.info.clear()  # as a session made outside app.db.engine.Database
        costs.windows(s, listed, 20)
        costs.windows(s, listed, 20)
    assert len(calls["medians"]) == 2


def test_overview_cards_follow_new_runs(
    client: TestClient, db: Database, headers: dict[str, str]
) -> None:
    seed(client, headers)  # kept-a: 8 runs; kept-b: 9, of which 6 of baseline (production)

    def sparklines(n: int) -> int:  # the inline SVG names itself in aria-label and <title>
        return page.count(f'aria-label="Cost per baseline run, last {n}"')

    page = client.get("/", headers=headers).text
    # The line is the production variant's: kept-b's 3 candidate runs are not on it.
    assert (sparklines(8), sparklines(6), sparklines(9)) == (1, 1, 0)
    post(client, headers, [at("kept-a", 40, LAST + timedelta(days=1))])
    page = client.get("/", headers=headers).text
    assert (sparklines(8), sparklines(6), sparklines(9)) == (0, 1, 1)
