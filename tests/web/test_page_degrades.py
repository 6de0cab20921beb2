"""The pipeline page answers 200 whatever the settings: a section that cannot be computed
says why in a sentence, never takes the page down (issue 25, item 2)."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import update

from app.db.engine import Database
from app.db.models import Pipeline
from tests.fixtures.evaluations import LINE, P, post_runs

HTML = {"Accept": "text/html"}


@pytest.fixture
def valued(
    client: TestClient, ingest_headers: dict[str, str], admin_headers: dict[str, str]
) -> TestClient:
    """The ranker with runs, evaluations and a value of quality: every section drawn."""
    post_runs(client, ingest_headers)
    r = client.post(f"{P}/evaluations", json={"evaluations": LINE}, headers=ingest_headers)
    assert r.status_code == 201, r.text
    put = client.put(P, json={"quality_value_usd_per_unit_month": 200_000}, headers=admin_headers)
    assert put.status_code == 200, put.text
    return client


def store(db: Database, **values: Any) -> None:
    """Settings written as an older release accepted them (the API refuses them now)."""
    with db.write() as session:
        session.execute(update(Pipeline).where(Pipeline.name == "ranker").values(**values))


@pytest.mark.parametrize(
    "values",
    [
        {"price_per_gpu_hour": 0.0},
        {"price_per_gpu_hour": 5e-324},
        {"runs_per_week": 5e-324},
        {"monthly_budget_usd": 5e-324},
        {"monthly_budget_usd": 0.0},
        {"quality_value_usd_per_unit_month": 5e-324},
        {"quality_value_usd_per_unit_month": 0.0},
        {"quality_margin": 5e-324},
        {"price_per_gpu_hour": 10_000.0, "runs_per_week": 1000.0, "monthly_budget_usd": 1e12},
    ],
)
def test_the_page_answers_with_stored_awkward_settings(
    valued: TestClient, db: Database, values: dict[str, float]
) -> None:
    store(db, **values)
    page = valued.get("/pipelines/ranker", headers=HTML)
    assert page.status_code == 200, page.text[:2000]
    assert "inf weeks" not in page.text and "nan" not in page.text.lower().split("<script")[0]
    fragment = valued.get("/pipelines/ranker/whatif")
    assert fragment.status_code == 200, fragment.text[:2000]
    for other in ("/", "/review", "/pipelines/ranker/settings"):
        assert valued.get(other, headers=HTML).status_code == 200, other


def test_a_section_that_cannot_be_computed_says_why(valued: TestClient, db: Database) -> None:
    """A price of 0 (accepted before the bounds) made the cost per run 0: the page was a
    bare '422 - cost per run must be > 0'. Now the value section says it, the rest shows."""
    store(db, price_per_gpu_hour=0.0)
    page = valued.get("/pipelines/ranker", headers=HTML)
    assert page.status_code == 200
    assert "Not shown with these settings: cost per run must be &gt; 0." in page.text
    for heading in ("goodput-h", "badput-h", "quality-h", "runs-h", "value-h"):
        assert f'id="{heading}"' in page.text  # the other sections are all there


@pytest.mark.parametrize(
    "values",
    [
        {"price_per_gpu_hour": 0.001, "runs_per_week": 0.01, "monthly_budget_usd": 1},
        {"quality_value_usd_per_unit_month": 0.01, "quality_margin": 1e-9, "gate_power": 0.99},
        {"price_per_gpu_hour": 10_000, "runs_per_week": 1000, "monthly_budget_usd": 1e12},
        {"quality_value_usd_per_unit_month": 1e12, "quality_margin": 1e6, "gate_power": 0.5},
    ],
)
def test_the_page_answers_at_the_edges_of_the_bounds(
    valued: TestClient, admin_headers: dict[str, str], values: dict[str, float]
) -> None:
    put = valued.put(P, json=values, headers=admin_headers)
    assert put.status_code == 200, put.text
    page = valued.get("/pipelines/ranker", headers=HTML)
    assert page.status_code == 200, page.text[:2000]
    assert "inf weeks" not in page.text and "inf years" not in page.text
    for heading in ("goodput-h", "badput-h", "quality-h", "runs-h", "value-h", "projection-h"):
        assert f'id="{heading}"' in page.text
    assert valued.get("/pipelines/ranker/whatif").status_code == 200
