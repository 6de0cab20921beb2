"""Pipeline settings in the browser: admin form with CSRF, validation, audit trail."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.db.engine import Database
from app.main import create_app
from app.pipelines.changes import Change, diff, shown
from app.settings import Settings
from app.web.settings import descriptions_text, parse_descriptions
from tests.fixtures.builders import make_token
from tests.fixtures.security import HTML, csrf_value, sign_in

FORM = {
    "display_name": "Ranker v2",
    "owner": "ranking-team",
    "monthly_budget_usd": "1500",
    "price_per_gpu_hour": "2.5",
    "runs_per_week": "2",
    "production_variant": "candidate",
    "quality_metric": "auc",
    "quality_margin": "0.01",  # unchanged: the default
    "variant_descriptions": "",  # unchanged: none
}


@pytest.fixture
def ranker(token_client: TestClient, db: Database) -> str:
    admin = make_token(db, "admin", name="setup")
    body = {"display_name": "Ranker", "monthly_budget_usd": 1400, "price_per_gpu_hour": 2.5}
    r = token_client.put(
        "/api/v1/pipelines/ranker", json=body, headers={"Authorization": f"Bearer {admin}"}
    )
    assert r.status_code == 200, r.text
    return "ranker"


def test_shown_and_diff() -> None:
    assert shown(1400.0) == "1400" and shown(2.75) == "2.75" and shown(None) is None
    before = {"display_name": "A", "monthly_budget_usd": "1400", "owner": ""}
    after = {"display_name": "A", "monthly_budget_usd": None, "owner": "team"}
    assert diff(before, after) == [
        Change("owner", "", "team"),
        Change("monthly_budget_usd", "1400", None),
    ]


def test_an_admin_edits_and_every_change_is_recorded(
    token_client: TestClient, db: Database, ranker: str
) -> None:
    sign_in(token_client, make_token(db, "admin", name="alice"))
    page = token_client.get(f"/pipelines/{ranker}/settings", headers=HTML)
    assert page.status_code == 200 and "<form" in page.text and "Save settings" in page.text
    r = token_client.post(
        f"/pipelines/{ranker}/settings", data={**FORM, "csrf": csrf_value(page.text)}
    )
    assert r.status_code == 303, r.text
    assert r.headers["location"] == f"/pipelines/{ranker}/settings?saved=6"
    api = token_client.get(f"/api/v1/pipelines/{ranker}").json()
    assert api["display_name"] == "Ranker v2" and api["monthly_budget_usd"] == 1500
    assert api["runs_per_week"] == 2 and api["owner"] == "ranking-team"
    assert api["production_variant"] == "candidate"
    after = token_client.get(f"/pipelines/{ranker}", headers=HTML).text
    assert 'data-change="monthly_budget_usd"' in after
    assert "<td>alice</td><td>Monthly budget (USD)</td><td>1400</td><td>1500</td>" in after


def test_validation_messages_in_the_form_and_nothing_saved(
    token_client: TestClient, db: Database, ranker: str
) -> None:
    sign_in(token_client, make_token(db, "admin", name="alice"))
    page = token_client.get(f"/pipelines/{ranker}/settings", headers=HTML)
    bad = {**FORM, "runs_per_week": "0", "price_per_gpu_hour": "cheap", "display_name": ""}
    r = token_client.post(
        f"/pipelines/{ranker}/settings", data={**bad, "csrf": csrf_value(page.text)}
    )
    assert r.status_code == 422
    assert 'id="e-runs_per_week"' in r.text and "must be at least 0.01" in r.text
    assert 'id="e-price_per_gpu_hour"' in r.text and 'id="e-display_name"' in r.text
    assert 'value="cheap"' in r.text  # what was typed stays in the box
    assert token_client.get(f"/api/v1/pipelines/{ranker}").json()["display_name"] == "Ranker"


def test_csrf_and_admin_scope_are_required(
    token_client: TestClient, db: Database, ranker: str
) -> None:
    sign_in(token_client, make_token(db, "read", name="bob"))
    page = token_client.get(f"/pipelines/{ranker}/settings", headers=HTML)
    assert page.status_code == 200
    assert "Save settings" not in page.text and 'data-field="monthly_budget_usd">1400<' in page.text
    csrf = csrf_value(page.text)  # the sign-out form's value: right CSRF, wrong scope
    r = token_client.post(f"/pipelines/{ranker}/settings", data={**FORM, "csrf": csrf})
    assert r.status_code == 403 and "admin scope" in r.text
    r = token_client.post(f"/pipelines/{ranker}/settings", data={**FORM, "csrf": "forged"})
    assert r.status_code == 403 and "CSRF" in r.text
    assert token_client.get(f"/api/v1/pipelines/{ranker}").json()["display_name"] == "Ranker"


def test_open_mode_shows_values_until_an_admin_signs_in(
    db: Database, settings: Settings, admin_headers: dict[str, str]
) -> None:
    """Reads stay open (no sign-in, no redirect); an admin signs in to edit a budget."""
    with TestClient(create_app(settings, database=db), follow_redirects=False) as client:
        r = client.put(
            "/api/v1/pipelines/p1", json={"monthly_budget_usd": 10}, headers=admin_headers
        )
        assert r.status_code == 200
        page = client.get("/pipelines/p1/settings", headers=HTML)
        assert page.status_code == 200 and '<form class="panel settings-form"' not in page.text
        assert "sign in with an admin token" in page.text and "Admin sign-in" in page.text
        # The API PUT is audited too (by token name).
        assert 'data-change="monthly_budget_usd"' in page.text
        # A read token cannot sign in where reads are open: signing in is for admins.
        refused = sign_in(client, make_token(db, "read", name="bob"))
        assert refused.status_code == 403 and "not an admin token" in refused.text
        sign_in(client, make_token(db, "admin", name="alice"))
        page = client.get("/pipelines/p1/settings", headers=HTML)
        assert "Save settings" in page.text and "Signed in as alice" in page.text
        form = {**FORM, "csrf": csrf_value(page.text)}
        r = client.post("/pipelines/p1/settings", data=form)
        assert r.status_code == 303, r.text
        assert client.get("/api/v1/pipelines/p1").json()["monthly_budget_usd"] == 1500
        after = client.get("/pipelines/p1", headers=HTML).text
        assert "<td>alice</td><td>Monthly budget (USD)</td><td>10</td><td>1500</td>" in after
        # Other readers, without the cookie, still read without signing in.
        client.cookies.clear()
        assert client.get("/pipelines/p1", headers=HTML).status_code == 200


def test_descriptions_as_text_and_back() -> None:
    text = "candidate: sharded input + async checkpoints\n\n baseline : the current job "
    parsed, problem = parse_descriptions(text)
    assert problem is None
    assert parsed == {
        "candidate": "sharded input + async checkpoints",
        "baseline": "the current job",
    }
    assert parse_descriptions(descriptions_text(parsed)) == (parsed, None)
    assert parse_descriptions("") == ({}, None)  # empty clears them
    assert parse_descriptions("ok: fine\nno colon here")[1] == (
        "Line 2: write it as variant: description"
    )
    assert parse_descriptions("a: x\na: y")[1] == "Line 2: a is described twice"
    assert shown({"b": "y", "a": "x"}) == "a: x; b: y" and shown({}) is None


def test_an_admin_sets_descriptions_and_the_quality_margin_in_the_form(
    token_client: TestClient, db: Database, ranker: str
) -> None:
    sign_in(token_client, make_token(db, "admin", name="alice"))
    page = token_client.get(f"/pipelines/{ranker}/settings", headers=HTML)
    form = {
        **FORM,
        "quality_margin": "0.005",
        "variant_descriptions": "candidate: sharded input\nbaseline: the current job",
        "csrf": csrf_value(page.text),
    }
    r = token_client.post(f"/pipelines/{ranker}/settings", data=form)
    assert r.status_code == 303, r.text
    assert r.headers["location"] == f"/pipelines/{ranker}/settings?saved=8"  # 6 + these 2
    api = token_client.get(f"/api/v1/pipelines/{ranker}").json()
    assert api["quality_margin"] == 0.005
    assert api["variant_descriptions"] == {
        "candidate": "sharded input",
        "baseline": "the current job",
    }
    again = token_client.get(f"/pipelines/{ranker}/settings", headers=HTML).text
    assert ">baseline: the current job\ncandidate: sharded input</textarea>" in again
    assert (
        "<td>alice</td><td>Variant descriptions</td><td>not set</td>"
        "<td>baseline: the current job; candidate: sharded input</td>"
    ) in again
    assert 'data-change="quality_margin"' in again


def test_bad_descriptions_and_margin_get_messages_and_nothing_is_saved(
    token_client: TestClient, db: Database, ranker: str
) -> None:
    sign_in(token_client, make_token(db, "admin", name="alice"))
    page = token_client.get(f"/pipelines/{ranker}/settings", headers=HTML)
    bad = {**FORM, "quality_margin": "-1", "variant_descriptions": "candidate sharded input"}
    r = token_client.post(
        f"/pipelines/{ranker}/settings", data={**bad, "csrf": csrf_value(page.text)}
    )
    assert r.status_code == 422
    assert 'id="e-variant_descriptions"' in r.text
    assert "Line 1: write it as variant: description" in r.text
    assert 'id="e-quality_margin"' in r.text and "must be at least 0" in r.text
    assert ">candidate sharded input</textarea>" in r.text  # what was typed stays
    long_name = "v" * 65  # variants are at most 64 characters, as in a run
    bad = {**FORM, "variant_descriptions": f"{long_name}: x"}
    r = token_client.post(
        f"/pipelines/{ranker}/settings", data={**bad, "csrf": csrf_value(page.text)}
    )
    assert r.status_code == 422
    assert f"{long_name}: " in r.text and "at most 64" in r.text  # names the variant
    api = token_client.get(f"/api/v1/pipelines/{ranker}").json()
    assert api["quality_margin"] == 0.01 and api["variant_descriptions"] == {}


def test_long_non_ascii_descriptions_fit_in_the_form(
    token_client: TestClient, db: Database, ranker: str
) -> None:
    """Twenty 200-character descriptions in a 4-byte script are ~50 KB percent-encoded:
    the form once refused anything over 8 KB as a failed CSRF check, losing the edits."""
    sign_in(token_client, make_token(db, "admin", name="alice"))
    page = token_client.get(f"/pipelines/{ranker}/settings", headers=HTML)
    about = "𝒜" * 200  # U+1D49C: 4 bytes in UTF-8, 12 once percent-encoded
    text = "\n".join(f"v{i}: {about}" for i in range(20))
    form = {**FORM, "variant_descriptions": text, "csrf": csrf_value(page.text)}
    r = token_client.post(f"/pipelines/{ranker}/settings", data=form)
    assert r.status_code == 303, r.text[:500]
    stored = token_client.get(f"/api/v1/pipelines/{ranker}").json()["variant_descriptions"]
    assert len(stored) == 20 and stored["v7"] == about


def test_an_extra_field_is_named_and_the_edits_are_kept(
    token_client: TestClient, db: Database, ranker: str
) -> None:
    sign_in(token_client, make_token(db, "admin", name="alice"))
    page = token_client.get(f"/pipelines/{ranker}/settings", headers=HTML)
    form = {**FORM, "gate_power": "0.9", "csrf": csrf_value(page.text)}
    r = token_client.post(f"/pipelines/{ranker}/settings", data=form)
    assert r.status_code == 422 and "CSRF" not in r.text
    assert "Unexpected field gate_power" in r.text
    assert 'value="Ranker v2"' in r.text  # what was typed is still in the form
    assert token_client.get(f"/api/v1/pipelines/{ranker}").json()["display_name"] == "Ranker"


def test_an_oversized_form_is_reported_as_too_large(
    token_client: TestClient, db: Database, ranker: str
) -> None:
    sign_in(token_client, make_token(db, "admin", name="alice"))
    page = token_client.get(f"/pipelines/{ranker}/settings", headers=HTML)
    form = {**FORM, "display_name": "x" * 200_000, "csrf": csrf_value(page.text)}
    r = token_client.post(f"/pipelines/{ranker}/settings", data=form, headers=HTML)
    assert r.status_code == 413 and "larger than 128 KB" in r.text and "CSRF" not in r.text
