"""One organisation's prior for every request: a pipeline's answers (projection, gate,
month to date) are the same before and after an org-wide read (the portfolio of every
pipeline or of one team), and equal to the prior computed from scratch from every
pipeline's window."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from app.analytics import costs
from app.analytics.prior import org_prior, prior_of
from app.db import rollup_reads
from app.db.engine import Database
from app.planning.cost_series import FIXED_PRIOR
from app.planning.scenario import RUN_WINDOW


def answers(client: TestClient) -> tuple[Any, ...]:
    """What a pipeline's page, gate and API say of its money, in JSON."""
    projection = client.get(
        "/api/v1/pipelines/recsys-ranker/projection", params={"cadences": "1,2"}
    ).json()
    gate = client.get("/api/v1/pipelines/recsys-ranker/gate").json()
    assert "result" in gate, gate
    return projection, gate


def test_a_pipeline_answers_the_same_before_and_after_an_org_wide_read(
    demo: TestClient,
) -> None:
    before = answers(demo)
    assert demo.get("/api/v1/portfolio", params={"team": "risk-ml"}).status_code == 200
    assert answers(demo) == before
    assert demo.get("/").status_code == 200
    assert demo.get("/api/v1/portfolio").status_code == 200
    assert answers(demo) == before


def test_the_kept_prior_is_the_one_computed_from_every_window(
    demo: TestClient, db: Database
) -> None:
    demo.get("/api/v1/portfolio", params={"team": "risk-ml"})  # a subset is read first
    with db.read() as s:
        kept = org_prior(s)
        again = org_prior(s)  # a second read of the same counters: the kept value
    with db.write() as s:  # a write session keeps nothing: computed from scratch
        listed = rollup_reads.costings(s)
        fresh = prior_of(s, list(costs.windows(s, listed, RUN_WINDOW).values()))
        assert org_prior(s) == fresh
        with_runs = len(costs.windows(s, listed, RUN_WINDOW))
    assert kept == again == fresh
    # Every demo pipeline with runs gives it (two or more: not the fixed prior).
    assert fresh.pipelines == with_runs >= 2 and fresh != FIXED_PRIOR
