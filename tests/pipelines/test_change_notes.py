"""Declared change notes: POST/GET/PUT/DELETE /api/v1/pipelines/{name}/changes (issue 34)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from fastapi.testclient import TestClient

from app.pipelines.notes import change_points
from app.pipelines.service import get_by_name
from tests.fixtures.builders import make_run

URL = "/api/v1/pipelines/ranker/changes"
NOTE = {"at": "2026-10-22T09:00:00+00:00", "description": "async checkpoints in production"}


def _pipeline(client: TestClient, admin: dict[str, str]) -> None:
    r = client.put("/api/v1/pipelines/ranker", json={"price_per_gpu_hour": 2.0}, headers=admin)
    assert r.status_code == 200, r.text


def test_declare_list_and_retry(
    client: TestClient, ingest_headers: dict[str, str], admin_headers: dict[str, str]
) -> None:
    _pipeline(client, admin_headers)
    r = client.post(URL, json=NOTE, headers=ingest_headers)
    assert r.status_code == 201, r.text
    first = r.json()
    assert (first["kind"], first["description"]) == ("declared", NOTE["description"])
    # The same note again (a retry) is the stored one, answered 200: nothing twice.
    again = client.post(URL, json=NOTE, headers=ingest_headers)
    assert (again.status_code, again.json()["id"]) == (200, first["id"])
    listed = client.get(URL).json()["changes"]
    assert [c["id"] for c in listed] == [first["id"]]
    assert listed[0]["at"].startswith("2026-10-22T09:00:00")


def test_price_change_is_a_change_point(
    client: TestClient, ingest_headers: dict[str, str], admin_headers: dict[str, str], db: object
) -> None:
    _pipeline(client, admin_headers)  # the first price is a setting, not a change
    client.put("/api/v1/pipelines/ranker", json={"price_per_gpu_hour": 3.0}, headers=admin_headers)
    client.post(URL, json=NOTE, headers=ingest_headers)
    kinds = [(c["kind"], c["description"]) for c in client.get(URL).json()["changes"]]
    # The note (Oct 22) is older than the price change (made now): oldest first.
    assert kinds == [
        ("declared", NOTE["description"]),
        ("price", "price changed from $2 to $3 per GPU-hour"),
    ]


def test_refusals_name_the_field(
    client: TestClient, ingest_headers: dict[str, str], admin_headers: dict[str, str]
) -> None:
    _pipeline(client, admin_headers)
    assert client.post(URL, json=NOTE).status_code == 401
    later = (datetime.now(UTC) + timedelta(days=3)).isoformat()
    cases = [
        ({"at": later, "description": "x"}, "at"),
        ({"at": "2026-10-22", "description": "x"}, "at"),
        ({"at": NOTE["at"], "description": ""}, "description"),
        ({"at": NOTE["at"], "description": "x" * 501}, "description"),
        ({"at": NOTE["at"]}, "description"),
    ]
    for body, field in cases:
        r = client.post(URL, json=body, headers=ingest_headers)
        assert r.status_code == 422, (body, r.text)
        assert r.json()["error"]["fields"][0]["field"] == field, r.text
    r = client.post("/api/v1/pipelines/nobody/changes", json=NOTE, headers=ingest_headers)
    assert r.status_code == 404
    assert client.get(URL).json()["changes"] == []  # nothing stored by a refusal


def test_admin_edits_and_deletes_with_audit(
    client: TestClient, ingest_headers: dict[str, str], admin_headers: dict[str, str]
) -> None:
    _pipeline(client, admin_headers)
    note_id = client.post(URL, json=NOTE, headers=ingest_headers).json()["id"]
    moved = {"at": "2026-10-21T09:00:00+00:00", "description": "async checkpoints"}
    assert client.put(f"{URL}/{note_id}", json=moved, headers=ingest_headers).status_code == 403
    r = client.put(f"{URL}/{note_id}", json=moved, headers=admin_headers)
    assert r.status_code == 200, r.text
    assert r.json()["description"] == "async checkpoints"
    assert client.put(f"{URL}/999", json=moved, headers=admin_headers).status_code == 404
    assert client.delete(f"{URL}/{note_id}", headers=admin_headers).status_code == 204
    assert client.get(URL).json()["changes"] == []
    page = client.get("/pipelines/ranker").text
    # The settings history says who edited and deleted the note.
    assert page.count("change note") >= 2


def test_change_points_for_the_forecast(
    client: TestClient, ingest_headers: dict[str, str], admin_headers: dict[str, str], db: object
) -> None:
    client.post("/api/v1/runs", json=make_run(), headers=ingest_headers)
    client.post(URL, json=NOTE, headers=ingest_headers)
    with db.read() as session:  # type: ignore[attr-defined]
        points = change_points(session, get_by_name(session, "ranker"))
    assert [(p.kind, p.at) for p in points] == [("declared", datetime(2026, 10, 22, 9, tzinfo=UTC))]


def test_page_marks_changes_and_admin_declares_from_it(
    client: TestClient, ingest_headers: dict[str, str], admin_headers: dict[str, str]
) -> None:
    for i, day in enumerate((1, 8, 15, 22)):
        started = f"2026-10-{day:02d}T08:00:00+00:00"
        run = make_run(
            run_id=f"r{i}", started_at=started, finished_at=started[:11] + "20:00:00+00:00"
        )
        assert client.post("/api/v1/runs", json=run, headers=ingest_headers).status_code in (
            200,
            201,
        )
    note = {"at": "2026-10-12T00:00:00+00:00", "description": "sharded <input> pipeline"}
    client.post(URL, json=note, headers=ingest_headers)
    page = client.get("/pipelines/ranker").text
    assert 'data-change-points="1"' in page
    # The per-run charts carry a dashed line between the runs of Oct 8 and Oct 15 (index
    # 1 and 2: x = 1.5), its words escaped for Plotly's markup.
    # Plotly's markup escaped (&lt;), then JSON-escaped for the script tag (\u0026).
    shown = '"text":"sharded \\u0026lt;input\\u0026gt; pipeline"'
    assert page.count('"x":1.5,"xref":"x","y":1,"yref":"paper","yanchor":"bottom",' + shown) == 2
    listed = client.get("/pipelines/ranker/changes")
    assert listed.status_code == 200 and "sharded &lt;input&gt; pipeline" in listed.text
    # Without signing in, no form: a POST is refused (no CSRF, no admin session).
    r = client.post(
        "/pipelines/ranker/changes", data={"at": "2026-10-13T00:00", "description": "x"}
    )
    assert r.status_code == 403


def _monthly_costs(client: TestClient) -> tuple[float, float]:
    """Today's expected bill as the portfolio keeps it and as the page reads it afresh."""
    kept = client.get("/api/v1/portfolio").json()["pipelines"][0]["monthly_cost_usd"]
    proj = client.get("/api/v1/pipelines/km/projection", params={"cadences": "1"}).json()
    return kept, proj["projections"]["baseline"]["current_monthly_cost_usd"]


def test_a_note_written_moves_the_kept_org_wide_forecast_with_the_page(
    client: TestClient, ingest_headers: dict[str, str], admin_headers: dict[str, str]
) -> None:
    # Twelve weekly retrainings, 10-12 h then 9-11 h (8 workers): a 10% step too small
    # to be found in the noise, so only a declared change starts the window after it.
    # The portfolio keeps each pipeline's inputs (declared changes included) under its
    # change count: a note written must move it, or the portfolio keeps the old window
    # ($910 here) while the page, read afresh, starts after the note ($866.67).
    r = client.put("/api/v1/pipelines/km", json={"runs_per_week": 1}, headers=admin_headers)
    assert r.status_code == 200, r.text
    now, runs = datetime.now(UTC), []
    for i in range(12):
        start = now - timedelta(days=7 * (12 - i))
        hours = (10 if i < 6 else 9) + i % 3
        runs.append(make_run(pipeline="km", run_id=f"km-{i}", started_at=start.isoformat(),
                             finished_at=(start + timedelta(hours=hours)).isoformat(),
                             interruptions=[], scheduling_wait_hours=0))  # fmt: skip
    r = client.post("/api/v1/runs/batch", json={"runs": runs}, headers=ingest_headers)
    assert r.status_code == 201, r.text
    before, page = _monthly_costs(client)
    assert before == page
    note = {"at": (now - timedelta(days=7 * 6 + 1)).isoformat(), "description": "smaller model"}
    r = client.post("/api/v1/pipelines/km/changes", json=note, headers=admin_headers)
    assert r.status_code == 201, r.text
    declared, page = _monthly_costs(client)
    assert declared == page and declared < before  # the window starts after the note
    moved = {"at": (now - timedelta(days=7 * 4 + 1)).isoformat(), "description": "later"}
    url = f"/api/v1/pipelines/km/changes/{r.json()['id']}"
    assert client.put(url, json=moved, headers=admin_headers).status_code == 200
    edited, page = _monthly_costs(client)
    assert edited == page and edited != declared  # four retrainings (10.25 h), not six (10 h)
    assert client.delete(url, headers=admin_headers).status_code == 204
    assert _monthly_costs(client) == (before, before)
