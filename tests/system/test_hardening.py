"""Hostile or careless input (issue 10, items 1, 8, 9 and 10): every crafted value gets a
4xx naming the field, on every ingest path (single, batch, the COPY path of 8+ runs on
PostgreSQL) and on every route's path and query parameters; nothing crafted is stored."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone
from typing import Any
from urllib.parse import quote

import pytest
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from sqlalchemy import text as sql

from app.db.engine import Database
from app.main import create_app
from app.runs.repository import BULK_THRESHOLD
from app.schemas_common import IDENTIFIER_RE, in_range_utc, nfc
from app.settings import Settings
from tests.fixtures.builders import make_run

# Each one a valid ISO timestamp with an offset, outside years 1970..2200 once in UTC.
BAD_TIMESTAMPS = [
    "9999-12-31T23:00:00-01:00",  # year 10000 in UTC
    "0001-01-01T00:10:00+01:00",  # year 0 in UTC
    "2201-01-01T00:00:00+00:00",
    "1969-12-31T23:59:59+00:00",
    "1970-01-01T00:30:00+01:00",  # 1969-12-31T23:30Z: the offset is applied first
]
# single: one POST; batch of 3: executemany; batch of BULK_THRESHOLD + 2: COPY on PostgreSQL.
PATHS = ["single", "batch-3", "batch-copy"]


def post(
    client: TestClient, headers: dict[str, str], path: str, bad: dict[str, Any]
) -> tuple[Any, str]:
    """Post ``bad`` (overrides of a valid run) on an ingest path; the response and the
    field prefix its errors carry."""
    if path == "single":
        return client.post("/api/v1/runs", json=make_run(**bad), headers=headers), ""
    size = 3 if path == "batch-3" else BULK_THRESHOLD + 2
    runs = [make_run(run_id=f"ok-{i}") for i in range(size - 1)] + [make_run(**bad)]
    response = client.post("/api/v1/runs/batch", json={"runs": runs}, headers=headers)
    return response, f"runs.{size - 1}."


def assert_refused(response: Any, field: str, reason: str = "") -> None:
    assert response.status_code == 422, response.text
    fields = response.json()["error"]["fields"]
    named = [f for f in fields if f["field"] == field]
    assert named, fields
    assert reason in named[0]["reason"]


def assert_reads_work(client: TestClient) -> None:
    """The reads the issue saw fail after one poisoned row: all answer, none stored."""
    for url in ["/", "/api/v1/pipelines", "/api/v1/runs", "/pipelines/ranker", "/metrics"]:
        assert client.get(url).status_code == 200, url
    for url in ["/api/v1/pipelines/ranker/projection", "/api/v1/pipelines/ranker/goodput"]:
        assert client.get(url).status_code == 200, url
    stored = client.get("/api/v1/runs", params={"pipeline": "ranker"}).json()["runs"]
    assert [r["run_id"] for r in stored] == ["first"]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("stamp", BAD_TIMESTAMPS)
@pytest.mark.parametrize("field", ["started_at", "finished_at"])
def test_out_of_range_timestamps_refused_on_every_ingest_path(
    client: TestClient, ingest_headers: dict[str, str], path: str, stamp: str, field: str
) -> None:
    # A known pipeline with one run, so the single path is PostgreSQL's one-statement insert.
    first = client.post("/api/v1/runs", json=make_run(run_id="first"), headers=ingest_headers)
    assert first.status_code == 201
    bad = {"run_id": "poison", field: stamp}
    if field == "started_at" and stamp.startswith(("0001", "1969", "1970")):
        bad["finished_at"] = "2026-11-02T22:00:00+00:00"
    response, prefix = post(client, ingest_headers, path, bad)
    assert_refused(response, prefix + field, "between 1970-01-01 and 2200-12-31")
    assert_reads_work(client)  # all-or-nothing: only "first" is stored


ENDS = [
    # 00:00Z on the first day, written with an offset (stored in UTC).
    ("1970-01-01T01:00:00+01:00", "1970-01-01T15:00:00+01:00", "1970-01-01T00:00:00"),
    ("2200-12-31T09:59:59+00:00", "2200-12-31T23:59:59+00:00", "2200-12-31T09:59:59"),
]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize(("started", "finished", "stored"), ENDS)
def test_timestamps_at_the_range_ends_are_stored_and_read_back(
    db: Database,
    settings: Settings,
    ingest_headers: dict[str, str],
    path: str,
    started: str,
    finished: str,
    stored: str,
) -> None:
    # The storage range, not the ingest rule: a server that allows runs dated ahead
    # (CADENCE_RUN_FUTURE_TOLERANCE_HOURS at its maximum) stores 2200 and reads it back.
    anything = settings.model_copy(update={"run_future_tolerance_hours": 1e7})
    with TestClient(create_app(anything, database=db)) as client:
        check_range_end(client, ingest_headers, path, started, finished, stored)


def check_range_end(
    client: TestClient,
    ingest_headers: dict[str, str],
    path: str,
    started: str,
    finished: str,
    stored: str,
) -> None:
    ends = {"run_id": "ends", "started_at": started, "finished_at": finished}
    response, _ = post(client, ingest_headers, path, ends)
    assert response.status_code == 201, response.text
    runs = client.get("/api/v1/runs", params={"limit": 1000}).json()["runs"]
    [run] = [r for r in runs if r["run_id"] == "ends"]
    assert run["started_at"].startswith(stored)
    assert client.get("/api/v1/pipelines").status_code == 200
    assert client.get("/pipelines/ranker").status_code == 200


@pytest.mark.parametrize(
    ("url", "field"),
    [
        ("/api/v1/runs?since=9999-12-31T23:00:00-01:00", "since"),
        ("/api/v1/runs?until=0001-01-01T00:10:00%2B01:00", "until"),
        ("/api/v1/runs?since=1700000000", "since"),
        ("/api/v1/pipelines/ranker/goodput?until=9999-12-31T23:00:00-01:00", "until"),
        ("/review?week=0001-W01", "week"),
        ("/review?week=9999-W52", "week"),
        ("/review?week=1969-W52", "week"),
    ],
)
def test_out_of_range_query_timestamps_and_weeks_are_422(
    client: TestClient, ingest_headers: dict[str, str], url: str, field: str
) -> None:
    client.post("/api/v1/runs", json=make_run(), headers=ingest_headers)
    response = client.get(url)
    assert_refused(response, field)


def test_range_check_converts_to_utc_first() -> None:
    # 2200-12-31T23:30-01:00 is 2201-01-01T00:30Z: outside, though its local year is 2200.
    late = datetime(2200, 12, 31, 23, 30, tzinfo=timezone(timedelta(hours=-1)))
    assert in_range_utc(late) is None
    year_10000 = datetime(9999, 12, 31, 23, 0, tzinfo=timezone(timedelta(hours=-1)))
    assert in_range_utc(year_10000) is None  # no OverflowError
    ok = datetime(2026, 11, 2, 9, 0, tzinfo=timezone(timedelta(hours=1)))
    assert in_range_utc(ok) == datetime(2026, 11, 2, 8, 0, tzinfo=UTC)


# Item 8: every route, every path and query parameter -------------------------------

CRAFTED = ["a\x00b", "a\x85b"]  # NUL (PostgreSQL refuses it in text) and a C1 control


def api_routes(routes: list[Any]) -> list[APIRoute]:
    """The app's endpoints; this FastAPI keeps an included router as one entry (its
    routers carry their prefix themselves)."""
    found = []
    for route in routes:
        if isinstance(route, APIRoute):
            found.append(route)
        elif hasattr(route, "original_router"):
            found += api_routes(route.original_router.routes)
    return found


def dependants(dependant: Any) -> list[Any]:
    """A route's dependant and those of its dependencies (which read parameters too)."""
    return [dependant] + [d for sub in dependant.dependencies for d in dependants(sub)]


def route_cases() -> list[tuple[str, str, str, str]]:
    """(method, url template, where, parameter) for every parameter of every route."""
    app = create_app(Settings(database_url="sqlite://"))
    cases = []
    for route in api_routes(app.routes):
        path_params = sorted({p.name for d in dependants(route.dependant) for p in d.path_params})
        query_params = sorted(
            {p.alias for d in dependants(route.dependant) for p in d.query_params}
        )
        for method in sorted(route.methods - {"HEAD"}):
            cases += [(method, route.path, "path", name) for name in path_params]
            cases += [(method, route.path, "query", name) for name in query_params]
    return cases


ROUTE_CASES = route_cases()


def test_the_route_table_has_the_parameters_the_issue_named() -> None:
    urls = {(m, u, p) for m, u, _, p in ROUTE_CASES}
    assert ("GET", "/api/v1/pipelines/{name}", "name") in urls
    assert ("GET", "/api/v1/runs", "pipeline") in urls
    assert ("GET", "/review", "week") in urls
    assert ("GET", "/pipelines/{name}", "baseline") in urls
    assert len(ROUTE_CASES) >= 60


@pytest.mark.parametrize("crafted", CRAFTED)
@pytest.mark.parametrize(("method", "template", "where", "name"), ROUTE_CASES)
def test_control_characters_in_any_parameter_are_422_naming_it(
    client: TestClient,
    admin_headers: dict[str, str],
    method: str,
    template: str,
    where: str,
    name: str,
    crafted: str,
) -> None:
    def fill(match: re.Match[str]) -> str:
        param = match.group(1)
        if where == "path" and param == name:
            return quote(crafted, safe="")
        return "1" if param in ("pk", "rule_id") else "ranker"

    url = re.sub(r"\{(\w+)(?::\w+)?\}", fill, template)  # {name} or {path:path}
    params = {name: crafted} if where == "query" else {}
    response = client.request(method, url, params=params, headers=admin_headers)
    assert_refused(response, name, "control characters")


# Item 9: look-alike identifiers ----------------------------------------------------

LOOK_ALIKES = [
    "tab\there",
    "new\nline",
    "carriage\rreturn",
    "c1\x85control",
    "bidi\u202eoverride",
    "isolate\u2066x\u2069",
    "left-to-right\u200emark",
    "zero\u200bwidth",
    "joiner\u200dx",
    "word\u2060joiner",
    "bom\ufeff",
    "soft\u00adhyphen",
    "no-break\u00a0space",
    "ideographic\u3000space",
    "hangul\u3164filler",
    "line\u2028separator",
    " leading-space",
    "trailing-space ",
]
RUN_IDENTIFIERS = ["run_id", "variant", "gpu_type", "quality_metric"]


@pytest.mark.parametrize("text", LOOK_ALIKES)
@pytest.mark.parametrize("field", [*RUN_IDENTIFIERS, "tag key"])
def test_look_alike_identifiers_refused(
    client: TestClient, ingest_headers: dict[str, str], field: str, text: str
) -> None:
    bad = {"tags": {text: "v"}} if field == "tag key" else {field: text}
    response = client.post("/api/v1/runs", json=make_run(**bad), headers=ingest_headers)
    assert_refused(response, f"tags.{text}.[key]" if field == "tag key" else field, "invisible")
    assert client.get("/api/v1/runs").json()["runs"] == []


@pytest.mark.parametrize("path", PATHS)
def test_look_alikes_refused_on_every_ingest_path(
    client: TestClient, ingest_headers: dict[str, str], path: str
) -> None:
    response, prefix = post(client, ingest_headers, path, {"run_id": "run\u200b-1"})
    assert_refused(response, prefix + "run_id", "invisible")


@pytest.mark.parametrize("text", LOOK_ALIKES)
def test_look_alike_pipeline_settings_refused(
    client: TestClient, admin_headers: dict[str, str], ingest_headers: dict[str, str], text: str
) -> None:
    client.post("/api/v1/runs", json=make_run(), headers=ingest_headers)
    for field in ("display_name", "owner", "quality_metric"):
        response = client.put("/api/v1/pipelines/ranker", json={field: text}, headers=admin_headers)
        assert_refused(response, field, "invisible")


def test_decomposed_and_composed_run_ids_are_the_same_run(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    composed, decomposed = "caf\u00e9-run", "cafe\u0301-run"
    first = client.post("/api/v1/runs", json=make_run(run_id=composed), headers=ingest_headers)
    assert first.status_code == 201
    again = client.post("/api/v1/runs", json=make_run(run_id=decomposed), headers=ingest_headers)
    assert again.status_code == 200  # an identical retry, not a second run
    assert again.json()["id"] == first.json()["id"]
    assert again.json()["run_id"] == composed


@pytest.mark.parametrize(
    "text", ["run-1", "a b", "ünïcödé · 日本語", "עברית", "العربية", "emoji 🚀🔥 𝔘", "e\u0301"]
)
def test_printable_identifiers_are_accepted(text: str) -> None:
    assert IDENTIFIER_RE.match(nfc(text))


def test_token_names_use_the_same_check(session: Any) -> None:
    from app.auth.service import create_token
    from app.exceptions import Invalid

    with pytest.raises(Invalid, match="invisible"):
        create_token(session, "ci\u202ebot", "ingest")
    row, _ = create_token(session, "  cafe\u0301 bot ", "ingest")
    assert row.name == "caf\u00e9 bot"


# Item 10: strict JSON types --------------------------------------------------------

LOOSE = [
    ({"workers": True}, "workers"),
    ({"workers": "8"}, "workers"),
    ({"workers": "yes"}, "workers"),
    ({"workers": 8.0}, "workers"),
    ({"gpu_utilization": True}, "gpu_utilization"),
    ({"gpu_utilization": "0.38"}, "gpu_utilization"),
    ({"data_stall_hours": False}, "data_stall_hours"),
    ({"started_at": 1793606400}, "started_at"),
    ({"started_at": 1793606400.5}, "started_at"),
    ({"started_at": "1793606400"}, "started_at"),
    ({"finished_at": True}, "finished_at"),
    ({"run_id": 123}, "run_id"),
    ({"tags": {"team": 1}}, "tags.team"),
    ({"interruptions": [{"resume_hours": "0.5"}]}, "interruptions.0.resume_hours"),
]


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize(("bad", "field"), LOOSE)
def test_loose_json_types_refused(
    client: TestClient,
    ingest_headers: dict[str, str],
    path: str,
    bad: dict[str, Any],
    field: str,
) -> None:
    response, prefix = post(client, ingest_headers, path, bad)
    assert_refused(response, prefix + field)


def test_integers_are_still_numbers_where_a_float_is_expected(
    client: TestClient, ingest_headers: dict[str, str]
) -> None:
    run = make_run(data_stall_hours=5, gpu_utilization=1, quality_value=1)
    response = client.post("/api/v1/runs", json=run, headers=ingest_headers)
    assert response.status_code == 201, response.text
    assert response.json()["data_stall_hours"] == 5.0


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"price_per_gpu_hour": "2.5"}, "price_per_gpu_hour"),
        ({"higher_is_better": "yes"}, "higher_is_better"),
        ({"higher_is_better": 1}, "higher_is_better"),
        ({"runs_per_week": True}, "runs_per_week"),
    ],
)
def test_loose_types_refused_in_other_bodies(
    client: TestClient,
    admin_headers: dict[str, str],
    ingest_headers: dict[str, str],
    body: dict[str, Any],
    field: str,
) -> None:
    client.post("/api/v1/runs", json=make_run(), headers=ingest_headers)
    response = client.put("/api/v1/pipelines/ranker", json=body, headers=admin_headers)
    assert_refused(response, field)
    plan = {
        "workers": "8",
        "wall_clock_hours": 14,
        "gpu_utilization": 0.38,
        "price_per_gpu_hour": 2,
    }
    assert_refused(client.post("/api/v1/plan", json=plan), "workers")


def test_a_run_stored_before_the_range_check_can_be_deleted(
    client: TestClient, db: Any, ingest_headers: dict[str, str], admin_headers: dict[str, str]
) -> None:
    """Rows written before this check (year 10000 in UTC) do not load; DELETE does not
    read the row, so an admin can remove one by id and the reads work again."""
    pk = client.post("/api/v1/runs", json=make_run(), headers=ingest_headers).json()["id"]
    sqlite = db.engine.dialect.name == "sqlite"  # naive UTC text there
    start, end = (
        ("10000-01-01 00:00:00.000000", "10000-01-01 01:00:00.000000")
        if sqlite
        else ("9999-12-31T23:00:00-01:00", "9999-12-31T23:30:00-01:00")
    )
    with db.write() as s:
        s.execute(
            sql("UPDATE run SET started_at = :a, finished_at = :b WHERE id = :pk"),
            {"a": start, "b": end, "pk": pk},
        )
    assert client.delete(f"/api/v1/runs/{pk}", headers=admin_headers).status_code == 204
    assert client.get("/api/v1/runs").json()["runs"] == []
    assert client.get(f"/api/v1/runs/{pk}").status_code == 404


@pytest.mark.parametrize(
    ("bad", "field"),
    [
        ({"evaluated_at": "9999-12-31T23:00:00-01:00"}, "evaluated_at"),
        ({"evaluated_at": 1793606400}, "evaluated_at"),
        ({"value": "0.79"}, "value"),
        ({"value": True}, "value"),
        ({"run_id": "first\u200b"}, "run_id"),
        ({"metric": "ndcg\n"}, "metric"),
    ],
)
def test_evaluations_take_the_same_checks(
    client: TestClient, ingest_headers: dict[str, str], bad: dict[str, Any], field: str
) -> None:
    client.post("/api/v1/runs", json=make_run(run_id="first"), headers=ingest_headers)
    good = {"run_id": "first", "evaluated_at": "2026-11-03T08:00:00+00:00", "value": 0.79}
    response = client.post(
        "/api/v1/pipelines/ranker/evaluations",
        json={"evaluations": [{**good, **bad}]},
        headers=ingest_headers,
    )
    assert_refused(response, f"evaluations.0.{field}")
    ok = client.post(
        "/api/v1/pipelines/ranker/evaluations", json={"evaluations": [good]}, headers=ingest_headers
    )
    assert ok.status_code == 201, ok.text
