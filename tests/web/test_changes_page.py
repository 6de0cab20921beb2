"""Change notes in the browser: an admin signed in declares, edits and deletes a note;
every refusal says why and stores nothing (issue 34)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from app.db.engine import Database
from app.main import create_app
from app.settings import Settings
from tests.fixtures.builders import make_token
from tests.fixtures.security import HTML, csrf_value, sign_in, token_settings

PAGE = "/pipelines/ranker/changes"


@pytest.fixture
def browser(
    db: Database, settings: Settings, admin_headers: dict[str, str]
) -> Iterator[TestClient]:
    with TestClient(create_app(settings, database=db), follow_redirects=False) as c:
        body = {"price_per_gpu_hour": 2.5, "monthly_budget_usd": 1000, "runs_per_week": 1}
        assert c.put("/api/v1/pipelines/ranker", json=body, headers=admin_headers).is_success
        yield c


def notes(c: TestClient) -> list[dict[str, object]]:
    return list(c.get("/api/v1/pipelines/ranker/changes").json()["changes"])


def test_an_admin_declares_edits_and_deletes(browser: TestClient, db: Database) -> None:
    page = browser.get(PAGE, headers=HTML)
    assert 'data-empty="changes"' in page.text and "Declare the change" not in page.text
    sign_in(browser, make_token(db, "admin", name="alice"))
    csrf = csrf_value(browser.get(PAGE, headers=HTML).text)
    bad = {"csrf": csrf, "at": "next week", "description": ""}
    r = browser.post(PAGE, data=bad)
    assert r.status_code == 422 and 'id="e-at"' in r.text and 'id="e-description"' in r.text
    assert notes(browser) == []
    # The box sends no offset: the time is UTC, as the label says.
    good = {"csrf": csrf, "at": "2026-10-22T09:00", "description": "async checkpoints"}
    r = browser.post(PAGE, data=good)
    assert r.status_code == 303 and r.headers["location"].endswith("done=created#notes")
    [note] = notes(browser)
    assert (note["at"], note["by"]) == ("2026-10-22T09:00:00Z", "alice")
    edit = {"csrf": csrf, "at": "2026-10-21T09:00", "description": "async checkpoints, v2"}
    r = browser.post(f"{PAGE}/{note['id']}", data={**edit, "action": "save"})
    assert r.status_code == 303 and notes(browser)[0]["description"] == "async checkpoints, v2"
    shown = browser.get(r.headers["location"], headers=HTML).text
    assert "Change note saved." in shown and 'data-change-point="declared"' in shown
    r = browser.post(f"{PAGE}/{note['id']}", data={"csrf": csrf, "action": "delete"})
    assert r.status_code == 303 and notes(browser) == []


def test_a_read_token_session_cannot_post(
    db: Database, database_url: str, admin_headers: dict[str, str]
) -> None:
    app = create_app(token_settings(database_url), database=db)
    with TestClient(app, follow_redirects=False) as c:
        assert c.put("/api/v1/pipelines/ranker", json={}, headers=admin_headers).is_success
        sign_in(c, make_token(db, "read", name="bob"))
        page = c.get(PAGE, headers=HTML)
        assert "does not have the admin scope" in page.text
        data = {"csrf": csrf_value(page.text), "at": "2026-10-22T09:00", "description": "x"}
        r = c.post(PAGE, data=data)
        assert r.status_code == 403 and "Only an admin" in r.text
        assert c.get("/api/v1/pipelines/ranker/changes", headers=admin_headers).json() == {
            "changes": []
        }
