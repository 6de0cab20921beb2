"""How many SQL statements one pipeline page costs: every statement the request sends
is counted (``before_cursor_execute`` on the test engine), none left out.

The pages run on a real Database (``committed_db``: its own connections, real commits),
as in production: the ``db`` fixture's outer transaction would add a SAVEPOINT and a
RELEASE to every unit of work, which a served request never sends. What is counted
beside the queries: on SQLite the ``BEGIN`` the engine sends for each unit of work
(app/db/engine.py); PostgreSQL's BEGIN is sent by psycopg itself and COMMIT is not a
cursor statement, so neither appears there. Connection set-up (SQLite's PRAGMAs,
PostgreSQL's time zone, a connect option) runs on the raw connection when the pool opens
it, before the counted requests, and is no statement of theirs.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from app.db.engine import Database
from app.demo import RANKER, load_demo
from app.main import create_app
from app.settings import Settings
from tests.fixtures.serving import statements

PAGE = f"/pipelines/{RANKER}"
# The issue found 22 (29 on SQLite and 30 on PostgreSQL here); 10 until the change points
# (issue 34) added one UNION statement of the declared notes and the price changes, which
# the charts and the forecast share; 2 more for the forecast's record (its stored rows and
# the runs it backtests), kept when warm; 1 more for the month's running attempts and
# recent experiments (one UNION statement, kept by the day); 5 more for the one
# organisation's prior (issue 34): its stamp (rollup_reads.prior_stamp), then, not kept
# yet, every pipeline's settings and change counters and the windows it is made from
# (2 statements). A warm page reads only the stamp.
MAX_PAGE_STATEMENTS = 19


@pytest.fixture
def demo_served(committed_db: Database, settings: Settings) -> Iterator[TestClient]:
    """The demo (the ranker: runs of two variants and scaling probes, evaluations, a
    budget, a candidate for the gate), committed, served by a real app."""
    with committed_db.write() as s:
        load_demo(s)
    with TestClient(create_app(settings, database=committed_db)) as client:
        assert client.get("/healthz").status_code == 200  # the pool's first connection
        yield client


def test_a_pipeline_page_costs_at_most_thirteen_statements(
    demo_served: TestClient, committed_db: Database
) -> None:
    committed_db.kept.clear()  # cold: nothing kept from an earlier request
    cold = statements(committed_db.engine, demo_served, PAGE)
    assert len(cold) <= MAX_PAGE_STATEMENTS, "\n".join(cold)
    # Warm, the windows and the weeks are kept (page_context.kept_reads), and the month's
    # running attempts and experiments (analytics.month): the variant statistics, which
    # carry the pipeline's change count, find them unchanged.
    warm = statements(committed_db.engine, demo_served, PAGE)
    # The record is kept too (app.analytics.record): 2 fewer statements more; and the
    # organisation's prior (app.analytics.prior): only its stamp is read again.
    assert len(warm) <= len(cold) - 8, "\n".join(warm)
    assert sum("md5(string_agg" in s or "group_concat" in s for s in warm) == 1  # the stamp
    assert not any(s.startswith("SELECT run_variant.pipeline_id") for s in warm)
    assert not any("forecast_record" in s for s in warm)
    assert not any("run.started_at >=" in s or "anon_1.member" in s for s in warm)
    queries = [s for s in cold if s != "BEGIN"]
    assert sum(s.startswith("SELECT pipeline.id, pipeline.name") for s in queries) == 1  # once
    assert sum("FROM evaluation" in s for s in queries) == 1


def test_the_what_if_re_render_reads_the_same_context(
    demo_served: TestClient, committed_db: Database
) -> None:
    """The what-if re-render builds the same context without the page-only reads (the
    runs table, the history, the alerts): fewer statements than the page."""
    committed_db.kept.clear()
    page = statements(committed_db.engine, demo_served, PAGE)
    committed_db.kept.clear()
    whatif = statements(committed_db.engine, demo_served, f"{PAGE}/whatif?cadence=2")
    assert len(whatif) == len(page) - 5, "\n".join(whatif)  # and the forecast's record


COUNTERS = "SELECT run_variant.pipeline_id, run_variant.variant, run_variant.changes FROM"


def counter_reads(seen: list[str]) -> int:
    """Statements that read the change counters (``rollup_reads.change_counters``)."""
    return sum(s.startswith(COUNTERS) for s in seen)


def test_the_overview_reads_the_change_counters_once(
    demo_served: TestClient, committed_db: Database
) -> None:
    # One read per request, cold or warm, whatever the organisation's size: every part of
    # the page (weeks, costs, month to date, cards, record) keys on one snapshot of them.
    committed_db.kept.clear()
    cold = statements(committed_db.engine, demo_served, "/")
    assert counter_reads(cold) == 1, "\n".join(cold)
    warm = statements(committed_db.engine, demo_served, "/")
    assert counter_reads(warm) == 1, "\n".join(warm)
    # The pipelines are listed once for the portfolio and its cards; cold, the cards
    # not kept read their pipelines' rows once more, for the gate.
    listed = [s for s in warm if s.startswith("SELECT pipeline.id, pipeline.name")]
    assert len(listed) == 1, "\n".join(warm)
