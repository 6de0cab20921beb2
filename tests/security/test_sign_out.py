"""Signing out ends the session on the server: a copied cookie stops working too."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient

import app.auth.service as auth
from app.db.engine import Database
from app.main import create_app
from app.security import sessions
from tests.fixtures.builders import make_token
from tests.fixtures.security import HTML, csrf_value, replace_cookie, sign_in, token_settings


def sign_out(client: TestClient) -> None:
    page = client.get("/", headers=HTML)
    r = client.post("/logout", data={"csrf": csrf_value(page.text)})
    assert r.status_code == 303


def test_a_copied_cookie_dies_with_the_sign_out(token_client: TestClient, db: Database) -> None:
    sign_in(token_client, make_token(db, "read", name="carol"))
    copied = token_client.cookies[sessions.SESSION_COOKIE]
    sign_out(token_client)
    # Someone replays the cookie they copied before the sign-out.
    replace_cookie(token_client, sessions.SESSION_COOKIE, copied)
    r = token_client.get("/", headers=HTML)
    assert r.status_code == 303 and r.headers["location"].startswith("/login")
    assert token_client.get("/api/v1/pipelines").status_code == 401


def test_signing_in_again_makes_a_new_session(token_client: TestClient, db: Database) -> None:
    secret = make_token(db, "read", name="dave")
    sign_in(token_client, secret)
    first = token_client.cookies[sessions.SESSION_COOKIE]
    sign_out(token_client)
    sign_in(token_client, secret)
    assert token_client.cookies[sessions.SESSION_COOKIE] != first
    assert token_client.get("/", headers=HTML).status_code == 200


def test_another_worker_drops_the_session_within_the_cache_ttl(
    db: Database, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two apps on one database stand for two workers; each has its own cache."""
    clock = [1000.0]
    monkeypatch.setattr(auth.time, "monotonic", lambda: clock[0])
    settings = token_settings(database_url)
    with (
        TestClient(create_app(settings, database=db), follow_redirects=False) as one,
        TestClient(create_app(settings, database=db), follow_redirects=False) as two,
    ):
        sign_in(one, make_token(db, "read", name="erin"))
        cookie = one.cookies[sessions.SESSION_COOKIE]
        replace_cookie(two, sessions.SESSION_COOKIE, cookie)
        assert two.get("/", headers=HTML).status_code == 200  # worker two caches it
        sign_out(one)
        clock[0] += 4.0  # within CADENCE_TOKEN_CACHE_SECONDS (5): still cached there
        assert two.get("/", headers=HTML).status_code == 200
        clock[0] += 2.0
        assert two.get("/", headers=HTML).status_code == 303


def test_a_cookie_without_a_session_id_is_refused(token_client: TestClient, db: Database) -> None:
    """Cookies issued before sign-out was recorded carry no id: they cannot be signed out,
    so they are not accepted (the browser signs in again)."""
    sign_in(token_client, make_token(db, "read", name="frank"))
    value = token_client.cookies[sessions.SESSION_COOKIE]
    claims = token_client.app.state.security.sessions.unsign(value)  # type: ignore[attr-defined]
    assert re.fullmatch(r"[0-9a-f]{32}", claims.pop("sid"))
    legacy = token_client.app.state.security.sessions.sign(claims)  # type: ignore[attr-defined]
    replace_cookie(token_client, sessions.SESSION_COOKIE, legacy)
    assert token_client.get("/", headers=HTML).status_code == 303
