"""The org-wide answers recalled between requests (the portfolio's rows and the review's
lines and CSV, the kept maps ``portfolio`` and ``review``; the review's levers,
``advice.kept_levers``) are
made once while nothing they come from changed, made again after any change (a run, a
budget or price, a new pipeline, a deletion), and always equal the answer made from
scratch."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.analytics import advice
from app.db.engine import Database
from app.planning.scenario import Scenario
from app.portfolio import service as portfolio
from app.review import service as review
from app.web import review as review_web
from tests.fixtures.builders import last_week_day, make_run, this_month_run


@pytest.fixture
def made(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, int]]:
    """How many times each answer was made from its inputs."""
    counts = {"portfolio": 0, "review": 0, "csv": 0}

    def counted(name: str, fn: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            counts[name] += 1
            return fn(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(portfolio, "_portfolio", counted("portfolio", portfolio._portfolio))
    monkeypatch.setattr(review, "_review", counted("review", review._review))
    monkeypatch.setattr(review_web, "csv_text", counted("csv", review_web.csv_text))
    yield counts


def post(client: TestClient, headers: dict[str, str], *runs: dict[str, Any]) -> None:
    r = client.post("/api/v1/runs/batch", json={"runs": list(runs)}, headers=headers)
    assert r.status_code == 201, r.text


def answers(client: TestClient) -> tuple[Any, str]:
    body = client.get("/api/v1/portfolio?sort=spend").json()
    csv = client.get("/review.csv")
    assert csv.status_code == 200, csv.text
    return body, csv.text


def from_scratch(client: TestClient, db: Database) -> tuple[Any, str]:
    db.kept.clear()
    return answers(client)


def test_answers_are_made_once_and_again_after_every_change(
    client: TestClient,
    db: Database,
    ingest_headers: dict[str, str],
    admin_headers: dict[str, str],
    made: dict[str, int],
) -> None:
    post(client, ingest_headers, make_run(pipeline="kept-p", run_id="p1", **this_month_run()),
         make_run(pipeline="kept-p", run_id="p0", **last_week_day(2)))  # fmt: skip
    first = answers(client)
    assert answers(client) == first
    assert made == {"portfolio": 1, "review": 1, "csv": 1}  # the second time: recalled
    assert from_scratch(client, db) == first

    def budget() -> None:
        body = {"monthly_budget_usd": 50.0}
        r = client.put("/api/v1/pipelines/kept-p", json=body, headers=admin_headers)
        assert r.status_code == 200, r.text

    def run(pipeline: str, run_id: str, day: int) -> None:
        post(client, ingest_headers, make_run(pipeline=pipeline, run_id=run_id,
                                              **last_week_day(day)))  # fmt: skip

    changes = [lambda: run("kept-p", "p2", 3), budget, lambda: run("kept-q", "q1", 1)]
    seen = [first]
    for change in changes:
        before = made["portfolio"]
        change()
        got = answers(client)
        assert got not in seen, "a change must reach the recalled answer"
        assert made["portfolio"] == before + 1
        assert from_scratch(client, db) == got
        seen.append(got)


def test_a_deleted_run_leaves_the_recalled_answers(
    client: TestClient, db: Database, ingest_headers: dict[str, str], admin_headers: dict[str, str]
) -> None:
    post(client, ingest_headers, *(make_run(pipeline="kept-d", run_id=f"d{i}", **last_week_day(i))
                                   for i in range(2)))  # fmt: skip
    before = answers(client)
    run = client.get("/api/v1/runs?pipeline=kept-d&limit=1", headers=admin_headers).json()
    assert client.delete(f"/api/v1/runs/{run['runs'][0]['id']}", headers=admin_headers).is_success
    after = answers(client)
    assert after != before
    assert after[0]["pipelines"][0]["month_to_date_usd"] >= 0
    assert from_scratch(client, db) == after


def test_kept_levers_equal_fresh_ones_after_runs_and_settings_change(
    client: TestClient, db: Database, ingest_headers: dict[str, str], admin_headers: dict[str, str]
) -> None:
    # The review ranks its costliest pipelines' levers from advice.kept_levers.
    at_cadence = Scenario(cadence=1.0)
    post(client, ingest_headers, *(make_run(pipeline="kept-l", run_id=f"l{i}", **last_week_day(i))
                                   for i in range(3)))  # fmt: skip

    def both() -> tuple[Any, Any]:
        with db.read() as s:
            kept_ = advice.kept_levers(s, "kept-l", at_cadence)
            fresh = advice.levers_of(s, "kept-l", variant=None, scenario=at_cadence)
        return kept_, fresh

    first, fresh = both()
    assert first == fresh and both()[0] is first  # kept
    post(client, ingest_headers, make_run(pipeline="kept-l", run_id="l9", data_stall_hours=6.0,
                                          **last_week_day(4)))  # fmt: skip
    after_run, fresh = both()
    assert after_run == fresh != first
    r = client.put(
        "/api/v1/pipelines/kept-l", json={"price_per_gpu_hour": 9.5}, headers=admin_headers
    )
    assert r.status_code == 200, r.text
    after_price, fresh = both()
    assert after_price == fresh != after_run
