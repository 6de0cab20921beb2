"""The org-wide month to date (``analytics.month.months``: inputs kept per pipeline, the
retrainings still to start counted for all pipelines at once) equals the pipeline page's
(``month_to_date_of``, one pipeline, the scalar count) at every moment of the month, and
follows the clock: a scheduled start that passes leaves one retraining fewer to forecast."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from fastapi.testclient import TestClient

from app.analytics import costs
from app.analytics.month import month_to_date_of, months
from app.db import rollup_reads
from app.db.engine import Database
from app.pipelines.service import briefs, get_by_name
from app.planning.scenario import RUN_WINDOW
from tests.fixtures.builders import make_run

# Newest baseline retraining Tue 2026-12-01 06:00 UTC, 2 runs a week (every 3.5 days):
# starts Dec 4 18:00, 8 06:00, 11 18:00, 15 06:00, 18 18:00, 22 06:00, 25 18:00, 29 06:00.
NEWEST = datetime(2026, 12, 1, 6, tzinfo=UTC)
MOMENTS = {  # now: retrainings still to start in December
    datetime(2026, 12, 2, 9, tzinfo=UTC): 8,
    datetime(2026, 12, 4, 18, tzinfo=UTC): 8,  # a start at now still counts
    datetime(2026, 12, 4, 18, 0, 1, tzinfo=UTC): 7,
    datetime(2026, 12, 29, 7, tzinfo=UTC): 0,
}


@pytest.fixture
def seeded(
    client: TestClient,
    db: Database,
    admin_headers: dict[str, str],
    ingest_headers: dict[str, str],
) -> None:
    """Two pipelines at 2 runs a week (mk-a with a $2,000 budget), six runs each, the
    newest at NEWEST."""
    admin, ingest = admin_headers, ingest_headers
    for name, budget in (("mk-a", 2000.0), ("mk-b", None)):
        body = {"runs_per_week": 2, "monthly_budget_usd": budget}
        assert client.put(f"/api/v1/pipelines/{name}", json=body, headers=admin).is_success
        runs = [
            make_run(pipeline=name, run_id=f"{name}-{i}",
                     started_at=(NEWEST - timedelta(days=3.5 * i)).isoformat(),
                     finished_at=(NEWEST - timedelta(days=3.5 * i, hours=-14 - i)).isoformat())
            for i in range(6)
        ]  # fmt: skip
        r = client.post("/api/v1/runs/batch", json={"runs": runs}, headers=ingest)
        assert r.status_code == 201, r.text


@pytest.mark.usefixtures("seeded")
def test_org_month_equals_the_pages_at_every_moment(db: Database) -> None:
    with db.read() as s:
        listed = briefs(s)
        windows = costs.windows(s, listed, RUN_WINDOW)
        month = datetime(2026, 12, 1).date()
        spends = rollup_reads.month_spend_by_variant(s, month, None)
        seen = []
        for now, remaining in MOMENTS.items():
            org = months(s, listed, now)
            for p in listed:
                page = month_to_date_of(
                    s,
                    get_by_name(s, p.name),
                    spends.get(p.id, {}),
                    windows[p.id],
                    None,
                    NEWEST,
                    now,
                )
                assert org[p.id] == page
                assert org[p.id].remaining_runs == remaining
            seen.append(org[listed[0].id].expected_end_of_month_usd)
        assert months(s, listed, datetime(2026, 12, 2, 9, tzinfo=UTC)) == months(
            s, listed, datetime(2026, 12, 2, 9, tzinfo=UTC)
        )
    # Fewer retrainings to come, a smaller expected end of month (the spend is the same).
    assert seen[0] == seen[1] > seen[2] > seen[3]


@pytest.mark.usefixtures("seeded")
def test_the_month_read_with_two_windows_is_kept_under_each(db: Database) -> None:
    # The six runs of mk-a ran 14 h, 15 h, ..., 19 h (newest first): a window of 2 draws
    # from the two newest, a window of 6 from all six, so their bills differ. Each call
    # must give what a cold read with its own window gives, whichever came first.
    now = datetime(2026, 12, 2, 9, tzinfo=UTC)
    with db.read() as s:
        listed = briefs(s)
        two, six = months(s, listed, now, window=2), months(s, listed, now, window=6)
    cold = Database(db.engine, bind=db._bind)  # nothing kept yet
    with cold.read() as s:
        assert months(s, listed, now, window=6) == six
    with Database(db.engine, bind=db._bind).read() as s:
        assert months(s, listed, now, window=2) == two
    a = listed[0].id
    assert two[a].expected_end_of_month_usd < six[a].expected_end_of_month_usd
