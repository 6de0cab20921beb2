"""Browser and web security: headers, read access in token mode, sign-in, sessions, CSRF."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

import app.auth.service as auth
from app.assets import asset_url
from app.db.engine import Database
from app.main import create_app
from app.security import sessions
from app.security.headers import CONTENT_SECURITY_POLICY
from app.security.router import safe_next
from app.security.signing import Signer, b64decode, b64encode
from app.settings import Settings
from tests.fixtures.builders import make_run, make_token
from tests.fixtures.security import (
    HTML,
    SECRET,
    bearer,
    csrf_value,
    replace_cookie,
    sign_in,
    token_settings,
)

PLAN = {"workers": 8, "wall_clock_hours": 14, "gpu_utilization": 0.38, "price_per_gpu_hour": 2.5}
EXPECTED_HEADERS = {
    "content-security-policy": CONTENT_SECURITY_POLICY,
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "same-origin",
}


def set_cookies(response: Any) -> dict[str, str]:
    """Set-Cookie headers of a response by cookie name (the raw header text)."""
    return {h.split("=", 1)[0]: h for h in response.headers.get_list("set-cookie")}


def assert_security_headers(response: Any) -> None:
    for name, value in EXPECTED_HEADERS.items():
        assert response.headers.get(name) == value, (name, response.headers.get(name))


# --- headers ------------------------------------------------------------------------


def test_security_headers_on_a_page_an_api_answer_and_a_404(client: TestClient) -> None:
    for path, headers, status in (
        ("/", HTML, 200),
        ("/api/v1/pipelines", {}, 200),
        ("/api/v1/runs/999999", {}, 404),
        ("/no-such-page", HTML, 404),
    ):
        r = client.get(path, headers=headers)
        assert r.status_code == status, (path, r.text)
        assert_security_headers(r)
        assert r.headers["cache-control"] == "no-store", path


def test_static_files_keep_their_caching(client: TestClient) -> None:
    vendor = client.get(asset_url("vendor/plotly-basic.min.js"))
    assert vendor.status_code == 200
    assert vendor.headers["cache-control"] == "public, max-age=31536000, immutable"
    assert_security_headers(vendor)
    css = client.get("/static/cadence.css")
    assert css.status_code == 200
    assert "no-store" not in css.headers.get("cache-control", "")
    assert css.headers["x-content-type-options"] == "nosniff"


def test_security_headers_on_a_500_and_a_413(db: Database, settings: Settings) -> None:
    app = create_app(settings, database=db)

    @app.get("/boom")
    def boom() -> None:
        raise RuntimeError("boom")

    with TestClient(app, raise_server_exceptions=False) as c:
        r = c.get("/boom")
        assert r.status_code == 500
        assert_security_headers(r)
        big = c.post("/api/v1/runs", content=b"x" * (settings.max_body_bytes + 1))
        assert big.status_code == 413
        assert_security_headers(big)


def test_the_policy_allows_scripts_from_this_server_only() -> None:
    directives = {
        name: value
        for name, _, value in (part.partition(" ") for part in CONTENT_SECURITY_POLICY.split("; "))
    }
    assert directives["script-src"] == "'self'"
    assert directives["frame-ancestors"] == "'none'"
    assert directives["object-src"] == "'none'"
    assert "unsafe-eval" not in CONTENT_SECURITY_POLICY


# --- open mode ----------------------------------------------------------------------


def test_open_mode_needs_no_sign_in(client: TestClient) -> None:
    for path in ("/", "/review", "/help", "/docs"):
        r = client.get(path, headers=HTML, follow_redirects=False)
        assert r.status_code == 200, path
        assert "Sign out" not in r.text
    assert client.get("/openapi.json").status_code == 200
    assert client.get("/api/v1/pipelines").status_code == 200
    assert client.post("/api/v1/plan", json=PLAN).status_code == 200
    # The sign-in form is there for admins (editing in the browser), reads need none.
    r = client.get("/login", params={"next": "/review"}, follow_redirects=False)
    assert r.status_code == 200 and "Admins sign in" in r.text


# --- token mode: the API ------------------------------------------------------------


def test_token_mode_api_reads_need_a_read_token(token_client: TestClient, db: Database) -> None:
    ingest = make_token(db, "ingest", name="only-ingest")
    read = make_token(db, "read", name="reader")
    admin = make_token(db, "admin", name="boss")
    for path in ("/api/v1/pipelines", "/api/v1/runs"):
        r = token_client.get(path)
        assert r.status_code == 401, path
        assert r.json()["error"]["code"] == "unauthorized"
        assert r.headers["www-authenticate"] == "Bearer"
        assert_security_headers(r)
        r = token_client.get(path, headers=bearer(ingest))
        assert r.status_code == 403, path
        assert "read" in r.json()["error"]["message"]
        assert token_client.get(path, headers=bearer(read)).status_code == 200, path
        assert token_client.get(path, headers=bearer(admin)).status_code == 200, path
    assert token_client.get("/api/v1/pipelines", headers=bearer("cad_nope")).status_code == 401
    # POST /plan only reads.
    assert token_client.post("/api/v1/plan", json=PLAN).status_code == 401
    assert token_client.post("/api/v1/plan", json=PLAN, headers=bearer(ingest)).status_code == 403
    assert token_client.post("/api/v1/plan", json=PLAN, headers=bearer(read)).status_code == 200


def test_an_empty_bearer_token_is_a_401_that_says_it_is_empty(token_client: TestClient) -> None:
    # `curl -H "Authorization: Bearer $CADENCE_TOKEN"` with the variable unset.
    for header in ("Bearer ", "Bearer"):
        r = token_client.post("/api/v1/runs", json=make_run(), headers={"Authorization": header})
        assert r.status_code == 401
        assert r.json()["error"]["message"].startswith("empty token:"), header
    r = token_client.post("/api/v1/runs", json=make_run(), headers={"Authorization": "Token x"})
    assert r.status_code == 401 and "malformed" in r.json()["error"]["message"]


def test_token_mode_writes_keep_their_own_scopes(token_client: TestClient, db: Database) -> None:
    ingest = make_token(db, "ingest", name="writer")
    read = make_token(db, "read", name="reader")
    assert token_client.post("/api/v1/runs", json=make_run()).status_code == 401
    assert token_client.post("/api/v1/runs", json=make_run(), headers=bearer(read)).status_code == (
        403
    )
    r = token_client.post("/api/v1/runs", json=make_run(), headers=bearer(ingest))
    assert r.status_code == 201, r.text


def test_token_mode_leaves_health_static_and_login_open(token_client: TestClient) -> None:
    for path in (
        "/healthz",
        "/readyz",
        "/static/cadence.css",
        asset_url("vendor/plotly-basic.min.js"),
    ):
        assert token_client.get(path).status_code == 200, path
    r = token_client.get("/login", headers=HTML)
    assert r.status_code == 200
    assert 'type="password"' in r.text and "API token" in r.text
    assert_security_headers(r)


# --- token mode: pages --------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "/",
        "/pipelines/ranker?cadence=2&price=3",
        "/review",
        "/help",
        "/docs",
        "/openapi.json",
        "/pipelines/ranker/runs.csv",
        "/no-such-page",
    ],
)
def test_pages_without_a_session_go_to_sign_in(token_client: TestClient, path: str) -> None:
    r = token_client.get(path, headers=HTML)
    assert r.status_code == 303, (path, r.text)
    location = r.headers["location"]
    assert location.startswith("/login?next=")
    assert safe_next(_next_of(location)) == path
    assert_security_headers(r)


def _next_of(location: str) -> str:
    from urllib.parse import parse_qs, urlsplit

    return parse_qs(urlsplit(location).query)["next"][0]


def test_json_fetches_without_a_session_get_401(token_client: TestClient) -> None:
    accept = {"Accept": "application/json"}
    for path in ("/pipelines/ranker/whatif?cadence=2", "/openapi.json", "/"):
        r = token_client.get(path, headers=accept)
        assert r.status_code == 401, path
        assert "sign in" in r.json()["error"]["message"]


def test_sign_in_sets_a_hardened_cookie_and_the_page_loads(
    token_client: TestClient, db: Database
) -> None:
    secret = make_token(db, "read", name="alice")
    r = sign_in(token_client, secret, next_="/review?week=2026-W48")
    assert r.status_code == 303
    assert r.headers["location"] == "/review?week=2026-W48"
    session = set_cookies(r)[sessions.SESSION_COOKIE]
    attributes = [a.strip().lower() for a in session.split(";")]
    assert "httponly" in attributes
    assert "samesite=lax" in attributes
    assert "max-age=43200" in attributes  # 12 hours
    assert "path=/" in attributes
    assert "secure" not in attributes  # plain http, development
    assert secret not in session  # the token itself is never in the cookie
    csrf = set_cookies(r)[sessions.CSRF_COOKIE].lower()
    assert "samesite=strict" in csrf

    page = token_client.get("/review?week=2026-W48", headers=HTML)
    assert page.status_code == 200
    assert "Signed in as alice" in page.text
    assert token_client.get("/", headers=HTML).status_code == 200
    assert token_client.get("/api/v1/pipelines").status_code == 200  # the session reads too
    assert token_client.get("/openapi.json").status_code == 200
    # Signed in, /login sends you on.
    again = token_client.get("/login", params={"next": "/help"})
    assert again.status_code == 303 and again.headers["location"] == "/help"


@pytest.mark.parametrize(
    ("base_url", "overrides"),
    [("https://testserver", {}), ("http://testserver", {"environment": "production"})],
)
def test_the_cookie_is_secure_over_https_and_in_production(
    db: Database, database_url: str, base_url: str, overrides: dict[str, str]
) -> None:
    app = create_app(token_settings(database_url, **overrides), database=db)
    secret = make_token(db, "read", name="secure")
    with TestClient(app, base_url=base_url, follow_redirects=False) as c:
        form = c.get("/login")
        assert "secure" in set_cookies(form)[sessions.CSRF_COOKIE].lower().split("; ")
        # The jar would not send a Secure cookie over http: hand it over explicitly.
        csrf_cookie = form.cookies[sessions.CSRF_COOKIE]
        r = c.post(
            "/login",
            data={"token": secret, "next": "/", "csrf": csrf_value(form.text)},
            headers={"Cookie": f"{sessions.CSRF_COOKIE}={csrf_cookie}"},
        )
        assert r.status_code == 303
        attributes = set_cookies(r)[sessions.SESSION_COOKIE].lower().split("; ")
        assert "secure" in attributes and "httponly" in attributes


def test_sign_in_with_a_bad_token_shows_the_form_again(
    token_client: TestClient, db: Database
) -> None:
    r = sign_in(token_client, "cad_not-a-real-token")
    assert r.status_code == 401
    assert "Sign-in failed: invalid token" in r.text
    assert 'type="password"' in r.text
    assert sessions.SESSION_COOKIE not in set_cookies(r)

    ingest = make_token(db, "ingest", name="pipeline-ci")
    r = sign_in(token_client, ingest)
    assert r.status_code == 403
    assert "has no read access" in r.text
    assert sessions.SESSION_COOKIE not in set_cookies(r)

    revoked = make_token(db, "read", name="gone")
    with db.write() as s:
        auth.revoke_token(s, "gone")
    r = sign_in(token_client, revoked)
    assert r.status_code == 401
    assert "revoked" in r.text


def test_a_tampered_cookie_is_rejected(token_client: TestClient, db: Database) -> None:
    secret = make_token(db, "read", name="mallory-target")
    sign_in(token_client, secret)
    good = token_client.cookies[sessions.SESSION_COOKIE]
    body, mac = good.split(".")
    assert token_client.get("/", headers=HTML).status_code == 200

    payload = b64decode(body)
    assert payload is not None
    longer = payload.replace(b'"exp":', b'"exp":9')  # a far later expiry, same signature
    forgeries = {
        "payload changed": b64encode(longer) + "." + mac,
        "signature changed": body + "." + ("A" if mac[0] != "A" else "B") + mac[1:],
        "other key": Signer("y" * 32, "session").sign(_payload(good)),
        "csrf key": Signer(SECRET, "csrf").sign(_payload(good)),
        "no signature": body,
        "garbage": "not a cookie",
    }
    for label, value in forgeries.items():
        replace_cookie(token_client, sessions.SESSION_COOKIE, value)
        r = token_client.get("/", headers=HTML)
        assert r.status_code == 303, label
        assert r.headers["location"] == "/login?next=%2F"
        # The bad cookie is cleared.
        assert "max-age=0" in set_cookies(r)[sessions.SESSION_COOKIE].lower(), label
        assert token_client.get("/api/v1/pipelines").status_code == 401, label


def _payload(cookie: str) -> dict[str, Any]:
    import json

    raw = b64decode(cookie.split(".")[0])
    assert raw is not None
    data: dict[str, Any] = json.loads(raw)
    return data


def test_an_expired_session_is_rejected(
    token_client: TestClient, db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [1_900_000_000.0]
    monkeypatch.setattr(sessions, "clock", lambda: now[0])
    sign_in(token_client, make_token(db, "read", name="sleepy"))
    assert _payload(token_client.cookies[sessions.SESSION_COOKIE])["exp"] == now[0] + 12 * 3600
    now[0] += 12 * 3600 - 1
    assert token_client.get("/", headers=HTML).status_code == 200
    now[0] += 1
    r = token_client.get("/", headers=HTML)
    assert r.status_code == 303 and r.headers["location"].startswith("/login")


def test_a_revoked_tokens_session_ends_within_the_cache_ttl(
    token_client: TestClient, db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = [1000.0]
    monkeypatch.setattr(auth.time, "monotonic", lambda: clock[0])
    sign_in(token_client, make_token(db, "read", name="leaver"))
    assert token_client.get("/", headers=HTML).status_code == 200
    with db.write() as s:
        auth.revoke_token(s, "leaver")
    # Within the 5 s cache the session still works...
    clock[0] += 4.0
    assert token_client.get("/", headers=HTML).status_code == 200
    # ...and after it the revocation holds, for pages and API reads alike.
    clock[0] += 2.0
    r = token_client.get("/", headers=HTML)
    assert r.status_code == 303 and r.headers["location"].startswith("/login")
    assert token_client.get("/api/v1/pipelines").status_code == 401


def test_a_session_does_not_survive_its_token_row_being_replaced(
    token_client: TestClient, db: Database
) -> None:
    """A forged-by-reuse id (e.g. a rebuilt database) fails the token fingerprint."""
    secret = make_token(db, "read", name="original")
    sign_in(token_client, secret)
    payload = _payload(token_client.cookies[sessions.SESSION_COOKIE])
    payload["fp"] = "0" * 16
    replace_cookie(token_client, sessions.SESSION_COOKIE, Signer(SECRET, "session").sign(payload))
    assert token_client.get("/", headers=HTML).status_code == 303


# --- CSRF ---------------------------------------------------------------------------


def test_sign_in_without_the_right_csrf_value_is_refused(
    token_client: TestClient, db: Database
) -> None:
    secret = make_token(db, "read", name="csrf-victim")
    form = token_client.get("/login")
    good = csrf_value(form.text)
    attempts = {
        "no field": {"token": secret, "next": "/"},
        "empty field": {"token": secret, "next": "/", "csrf": ""},
        "wrong field": {"token": secret, "next": "/", "csrf": good[:-2] + "xx"},
        "the cookie itself": {
            "token": secret,
            "next": "/",
            "csrf": token_client.cookies[sessions.CSRF_COOKIE],
        },
    }
    for label, data in attempts.items():
        r = token_client.post("/login", data=data)
        assert r.status_code == 403, label
        assert "CSRF" in r.text, label
        assert sessions.SESSION_COOKIE not in set_cookies(r), label
        # The refusal hands out a new CSRF cookie: put the original back for the next try.
        replace_cookie(token_client, sessions.CSRF_COOKIE, form.cookies[sessions.CSRF_COOKIE])
    # The right value but no cookie (a cross-site POST carries none: SameSite=Strict).
    token_client.cookies.delete(sessions.CSRF_COOKIE)
    r = token_client.post("/login", data={"token": secret, "next": "/", "csrf": good})
    assert r.status_code == 403
    # The refusal page works as a form again.
    r = token_client.post("/login", data={"token": secret, "next": "/", "csrf": csrf_value(r.text)})
    assert r.status_code == 303


@pytest.mark.parametrize(
    "target",
    [
        "//evil.example",
        "//evil.example/path",
        "https://evil.example",
        "/\\evil.example",
        "/\t/evil.example",
        "javascript:alert(1)",
        "evil.example",
        "",
    ],
)
def test_sign_in_never_redirects_off_site(
    token_client: TestClient, db: Database, target: str
) -> None:
    secret = make_token(db, "read", name="redirected")
    if "\t" in target:  # a control character in a query string is a 422 (issue 10)...
        assert token_client.get("/login", params={"next": target}).status_code == 422
        form = token_client.get("/login")  # ...and in the posted form it is ignored
        data = {"token": secret, "next": target, "csrf": csrf_value(form.text)}
        r = token_client.post("/login", data=data)
    else:
        r = sign_in(token_client, secret, next_=target)
    assert r.status_code == 303
    assert r.headers["location"] == "/"


def test_safe_next_keeps_local_paths() -> None:
    assert safe_next("/pipelines/ranker?cadence=2#gate") == "/pipelines/ranker?cadence=2#gate"
    assert safe_next("/review?week=2026-W48") == "/review?week=2026-W48"
    assert safe_next(None) == "/"
    assert safe_next("/\u00e9vil") == "/"


def test_sign_out_clears_the_cookie(token_client: TestClient, db: Database) -> None:
    sign_in(token_client, make_token(db, "read", name="bob"))
    page = token_client.get("/", headers=HTML)
    assert page.status_code == 200
    assert 'action="/logout"' in page.text
    # GET never signs out (no state change on GET).
    assert token_client.get("/logout").status_code == 405
    # Without the CSRF value: refused, and still signed in.
    refused = token_client.post("/logout", data={}, headers=HTML)
    assert refused.status_code == 403
    assert "CSRF" in refused.text
    assert token_client.get("/", headers=HTML).status_code == 200

    r = token_client.post("/logout", data={"csrf": csrf_value(page.text)})
    assert r.status_code == 303
    assert r.headers["location"] == "/login"
    cleared = set_cookies(r)[sessions.SESSION_COOKIE].lower()
    assert "max-age=0" in cleared
    assert sessions.SESSION_COOKIE not in token_client.cookies
    assert token_client.get("/", headers=HTML).status_code == 303


def test_a_signed_in_page_restores_a_missing_csrf_cookie(
    token_client: TestClient, db: Database
) -> None:
    sign_in(token_client, make_token(db, "read", name="carol"))
    token_client.cookies.delete(sessions.CSRF_COOKIE)
    page = token_client.get("/help", headers=HTML)
    assert page.status_code == 200
    assert sessions.CSRF_COOKIE in set_cookies(page)
    r = token_client.post("/logout", data={"csrf": csrf_value(page.text)})
    assert r.status_code == 303


def test_a_read_token_opens_pages_for_scripts_too(token_client: TestClient, db: Database) -> None:
    read = make_token(db, "read", name="script")
    r = token_client.get("/api/v1/runs", headers=bearer(read))
    assert r.status_code == 200
    r = token_client.get("/help", headers={**HTML, **bearer(read)})
    assert r.status_code == 200
    assert "Sign out" not in r.text  # no browser session to end
