"""The pipeline page's kept reads (``page_context.kept_reads``: the run windows, the
weeks and this month's spend, kept while the pipeline's change count and settings are the
same) follow every change, and a warm page equals a cold one."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient

from app.db.engine import Database
from tests.fixtures.builders import last_week_day, make_run, this_month_run

PAGE = "/pipelines/kept-page/whatif"


def sections(client: TestClient) -> dict[str, Any]:
    r = client.get(PAGE)
    assert r.status_code == 200, r.text
    return r.json()


def cold(client: TestClient, db: Database) -> dict[str, Any]:
    db.kept.clear()
    return sections(client)


def post(client: TestClient, headers: dict[str, str], *runs: dict[str, Any]) -> None:
    r = client.post("/api/v1/runs/batch", json={"runs": list(runs)}, headers=headers)
    assert r.status_code == 201, r.text


def test_a_warm_page_follows_runs_and_settings(
    client: TestClient, db: Database, ingest_headers: dict[str, str], admin_headers: dict[str, str]
) -> None:
    post(client, ingest_headers, *(make_run(pipeline="kept-page", run_id=f"k{i}",
                                            **last_week_day(i)) for i in range(4)))  # fmt: skip
    first = sections(client)
    assert sections(client) == first == cold(client, db)

    def setting(**body: Any) -> None:
        r = client.put("/api/v1/pipelines/kept-page", json=body, headers=admin_headers)
        assert r.status_code == 200, r.text

    changes = [
        lambda: post(client, ingest_headers, make_run(pipeline="kept-page", run_id="k9",
                                                      workers=16, **this_month_run())),
        lambda: setting(price_per_gpu_hour=7.25),
        lambda: setting(runs_per_week=3),
    ]  # fmt: skip
    seen = [first]
    for change in changes:
        change()
        got = sections(client)
        assert got not in seen, "a change must reach the kept page"
        assert got == cold(client, db)
        seen.append(got)
