"""Batch ingestion (all or nothing) and the paginated run list."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime, timedelta

import pytest
from fastapi.testclient import TestClient

from app.db.engine import Database
from app.runs.schemas import BatchOut
from tests.fixtures.builders import count_runs, make_run


def runs(n: int, **overrides: object) -> list[dict[str, object]]:
    start = datetime(2026, 1, 5, 8, tzinfo=UTC)
    return [
        make_run(
            run_id=f"r{i:03d}",
            started_at=(start + timedelta(days=i)).isoformat(),
            finished_at=(start + timedelta(days=i, hours=14)).isoformat(),
            **overrides,
        )
        for i in range(n)
    ]


def test_batch_creates_all(
    client: TestClient, db: Database, ingest_headers: dict[str, str]
) -> None:
    r = client.post("/api/v1/runs/batch", json={"runs": runs(5)}, headers=ingest_headers)
    assert r.status_code == 201, r.text
    body = r.json()
    assert (body["created"], body["existing"]) == (5, 0)
    assert [item["index"] for item in body["runs"]] == [0, 1, 2, 3, 4]
    assert count_runs(db) == 5


def test_batch_retry_is_200_and_no_duplicates(
    client: TestClient, db: Database, ingest_headers: dict[str, str]
) -> None:
    client.post("/api/v1/runs/batch", json={"runs": runs(3)}, headers=ingest_headers)
    r = client.post("/api/v1/runs/batch", json={"runs": runs(4)}, headers=ingest_headers)
    assert r.status_code == 201
    assert (r.json()["created"], r.json()["existing"]) == (1, 3)
    again = client.post("/api/v1/runs/batch", json={"runs": runs(4)}, headers=ingest_headers)
    assert again.status_code == 200
    assert count_runs(db) == 4


def test_batch_bad_items_named_by_index_and_nothing_written(
    client: TestClient, db: Database, ingest_headers: dict[str, str]
) -> None:
    items = runs(5)
    items[1]["gpu_utilization"] = 38
    items[3]["finished_at"] = items[3]["started_at"]
    r = client.post("/api/v1/runs/batch", json={"runs": items}, headers=ingest_headers)
    assert r.status_code == 422
    fields = {f["field"] for f in r.json()["error"]["fields"]}
    assert "runs.1.gpu_utilization" in fields
    assert count_runs(db) == 0
    # Cross-field errors are named by index too.
    items = runs(3)
    items[2]["finished_at"] = items[2]["started_at"]
    r = client.post("/api/v1/runs/batch", json={"runs": items}, headers=ingest_headers)
    assert r.status_code == 422
    assert r.json()["error"]["fields"] == [
        {"field": "runs.2.finished_at", "reason": "must be after started_at"}
    ]
    assert count_runs(db) == 0


def test_batch_with_one_conflict_writes_nothing(
    client: TestClient, db: Database, ingest_headers: dict[str, str]
) -> None:
    client.post("/api/v1/runs", json=runs(1)[0], headers=ingest_headers)
    items = runs(3)
    items[0]["workers"] = 4  # differs from the stored r000
    r = client.post("/api/v1/runs/batch", json={"runs": items}, headers=ingest_headers)
    assert r.status_code == 409
    assert {f["field"] for f in r.json()["error"]["fields"]} >= {"runs.0.workers"}
    assert count_runs(db) == 1


def test_batch_duplicate_run_ids(
    client: TestClient, db: Database, ingest_headers: dict[str, str]
) -> None:
    items = runs(2)
    same = {"runs": [items[0], items[0], items[1]]}
    r = client.post("/api/v1/runs/batch", json=same, headers=ingest_headers)
    assert r.status_code == 201
    assert [i["status"] for i in r.json()["runs"]] == ["created", "existing", "created"]
    # The answer is built as plain dicts (app.runs.service.batch_json): it is a BatchOut,
    # field for field, the same id for both copies of the run.
    answer = BatchOut.model_validate_json(r.content)
    assert answer.model_dump(mode="json") == r.json()
    assert (answer.created, answer.existing) == (2, 1)
    assert answer.runs[0].id == answer.runs[1].id != answer.runs[2].id
    assert [(i.index, i.run_id, i.pipeline) for i in answer.runs] == [
        (n, run["run_id"], run["pipeline"]) for n, run in enumerate(same["runs"])
    ]
    assert count_runs(db) == 2
    different = {"runs": [dict(items[0], run_id="z"), dict(items[1], run_id="z")]}
    r = client.post("/api/v1/runs/batch", json=different, headers=ingest_headers)
    assert r.status_code == 422
    assert r.json()["error"]["fields"][0]["field"] == "runs.1.run_id"


def test_batch_limits(client: TestClient, ingest_headers: dict[str, str]) -> None:
    r = client.post("/api/v1/runs/batch", json={"runs": []}, headers=ingest_headers)
    assert r.status_code == 422
    small = [
        {k: v for k, v in make_run(run_id=f"x{i}").items() if k != "interruptions"}
        for i in range(1001)
    ]
    for item in small:
        item["tags"] = {}
        item.pop("quality_metric")
    r = client.post("/api/v1/runs/batch", json={"runs": small}, headers=ingest_headers)
    assert r.status_code in (413, 422)
    assert "1000" in r.text or "bytes" in r.text


def test_list_newest_first_with_cursor(client: TestClient, ingest_headers: dict[str, str]) -> None:
    client.post("/api/v1/runs/batch", json={"runs": runs(7)}, headers=ingest_headers)
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        params = {"limit": 3, "pipeline": "ranker"} | ({"cursor": cursor} if cursor else {})
        page = client.get("/api/v1/runs", params=params).json()
        seen += [r["run_id"] for r in page["runs"]]
        pages += 1
        cursor = page["next_cursor"]
        if not cursor:
            break
    assert pages == 3
    assert seen == [f"r{i:03d}" for i in range(6, -1, -1)]


def test_list_filters(client: TestClient, ingest_headers: dict[str, str]) -> None:
    client.post("/api/v1/runs/batch", json={"runs": runs(4)}, headers=ingest_headers)
    client.post(
        "/api/v1/runs/batch",
        json={"runs": runs(2, variant="candidate", pipeline="other")},
        headers=ingest_headers,
    )
    got = client.get("/api/v1/runs", params={"variant": "candidate"}).json()["runs"]
    assert {(r["pipeline"], r["variant"]) for r in got} == {("other", "candidate")}
    got = client.get(
        "/api/v1/runs",
        params={
            "pipeline": "ranker",
            "since": "2026-01-06T00:00:00+00:00",
            "until": "2026-01-08T00:00:00+00:00",
        },
    ).json()["runs"]
    assert [r["run_id"] for r in got] == ["r002", "r001"]


def test_list_rejects_bad_params(client: TestClient) -> None:
    assert client.get("/api/v1/runs", params={"limit": 5000}).status_code == 422
    r = client.get("/api/v1/runs", params={"cursor": "garbage!!"})
    assert r.status_code == 422
    assert r.json()["error"]["fields"][0]["field"] == "cursor"
    r = client.get("/api/v1/runs", params={"since": "2026-01-01T00:00:00"})
    assert r.status_code == 422
    assert client.get("/api/v1/runs", params={"pipeline": "nope"}).status_code == 404


def test_large_batch_stores_exactly_what_was_sent(
    client: TestClient, db: Database, ingest_headers: dict[str, str]
) -> None:
    """Batches of BULK_THRESHOLD runs or more take PostgreSQL's COPY path: same results."""
    items = runs(40)
    for i, item in enumerate(items):
        item["pipeline"] = f"bulk-{i % 3}"
        item["mfu"] = None if i % 2 else 0.25
        item["price_per_gpu_hour"] = None if i % 3 else 3.5
        item["tags"] = {"i": str(i), "quote": 'it\'s "x"\ttab'}
        item["interruptions"] = [
            {
                "lost_progress_hours": 0.1 * k,
                "resume_hours": 0.2,
                "reschedule_hours": 0.3,
                "cause": None if k else "preempted",
            }
            for k in range(i % 3)
        ]
    r = client.post("/api/v1/runs/batch", json={"runs": items}, headers=ingest_headers)
    assert r.status_code == 201, r.text
    assert r.json()["created"] == 40
    again = client.post("/api/v1/runs/batch", json={"runs": items}, headers=ingest_headers)
    assert (again.status_code, again.json()["existing"]) == (200, 40)
    assert count_runs(db) == 40
    stored = {}
    for name in ("bulk-0", "bulk-1", "bulk-2"):
        page = client.get("/api/v1/runs", params={"pipeline": name, "limit": 100}).json()
        stored.update({run["run_id"]: run for run in page["runs"]})
    for i, item in enumerate(items):
        run = stored[item["run_id"]]
        assert run["pipeline"] == item["pipeline"]
        assert run["started_at"] == item["started_at"].replace("+00:00", "Z")
        assert run["mfu"] == item["mfu"]
        assert run["price_per_gpu_hour"] == item["price_per_gpu_hour"]
        assert run["tags"] == item["tags"]
        assert run["gpu_hours"] == 112.0
        assert [x["lost_progress_hours"] for x in run["interruptions"]] == [
            0.1 * k for k in range(i % 3)
        ]
        assert [x["cause"] for x in run["interruptions"]] == [
            None if k else "preempted" for k in range(i % 3)
        ]
    # A changed copy of one run inside a large batch: 409, nothing new written.
    changed = runs(45)
    for i, item in enumerate(changed):
        item["pipeline"] = items[i]["pipeline"] if i < 40 else "bulk-new"
        if i < 40:
            changed[i] = dict(items[i])
    changed[7] = dict(items[7], workers=2)
    r = client.post("/api/v1/runs/batch", json={"runs": changed}, headers=ingest_headers)
    assert r.status_code == 409
    assert "runs.7.workers" in {f["field"] for f in r.json()["error"]["fields"]}
    assert count_runs(db) == 40


def test_batch_body_errors(client: TestClient, ingest_headers: dict[str, str]) -> None:
    headers = {**ingest_headers, "content-type": "application/json"}
    r = client.post("/api/v1/runs/batch", content=b"{not json", headers=headers)
    assert r.status_code == 422
    assert r.json()["error"]["code"] == "validation_error"
    r = client.post(
        "/api/v1/runs/batch", json={"runs": [make_run()], "extra": 1}, headers=ingest_headers
    )
    assert r.status_code == 422
    assert {f["field"] for f in r.json()["error"]["fields"]} == {"extra"}
    r = client.post(
        "/api/v1/runs/batch", json={"runs": [make_run(pipeline="Bad!")]}, headers=ingest_headers
    )
    assert r.json()["error"]["fields"][0] == {
        "field": "runs.0.pipeline",
        "reason": "must be a slug: 1-63 lowercase letters, digits, '-' or '_', starting and "
        "ending with a letter or digit (e.g. 'recsys-ranker')",
    }
    assert client.post("/api/v1/runs/batch", json={"runs": []}).status_code == 401


def test_list_entries_equal_single_reads(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    """The list is serialised from plain dicts, single reads from models: same JSON."""
    items = runs(3)
    items[1]["interruptions"] = []
    items[2]["mfu"] = 0.31
    client.post("/api/v1/runs/batch", json={"runs": items}, headers=ingest_headers)
    listed = client.get("/api/v1/runs", params={"pipeline": "ranker"}).json()["runs"]
    assert len(listed) == 3
    for entry in listed:
        assert client.get(f"/api/v1/runs/{entry['id']}").json() == entry


def crafted(value: object) -> str:
    """A cursor as the server writes them (unpadded URL-safe base64 of JSON)."""
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")


CRAFTED_CURSORS = [
    crafted(["2026-01-01T00:00:00+00:00", 10**30]),  # beyond BIGINT: a database error
    "WyIyMDI2LTAxLTAxVDAwOjAwOjAwKzAwOjAwIiwgSW5maW5pdHld",  # id Infinity: OverflowError
    crafted(["2026-01-01T00:00:00+00:00", 1.5]),
    crafted(["2026-01-01T00:00:00+00:00", True]),
    crafted(["2026-01-01T00:00:00+00:00", -1]),
    crafted(["2026-01-01T00:00:00", 1]),  # naive: compared with aware times
    crafted(["0001-01-01T00:00:00+14:00", 1]),  # year 0 once in UTC
    crafted(["9999-12-31T23:59:59-14:00", 1]),  # year 10000 once in UTC
    crafted([["2026-01-01"], 1]),
    crafted({"a": 1}),
    crafted("[" * 5000),  # a deep array: RecursionError in the JSON parser
    "x" * 10_000,
    "%%%",
    "é",
]


@pytest.mark.parametrize("cursor", CRAFTED_CURSORS)
def test_crafted_cursors_are_a_422_naming_cursor(
    client: TestClient, ingest_headers: dict[str, str], cursor: str
) -> None:
    r = client.post("/api/v1/runs/batch", json={"runs": runs(2)}, headers=ingest_headers)
    assert r.status_code == 201, r.text
    for url in ("/api/v1/runs", "/api/v1/pipelines/ranker/evaluations"):
        got = client.get(url, params={"cursor": cursor})
        assert got.status_code == 422, (url, got.text)
        assert got.json()["error"]["fields"][0]["field"] == "cursor"
