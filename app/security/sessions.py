"""Browser sessions and CSRF tokens for ``CADENCE_READ_ACCESS=token``.

Session cookie ``cadence_session``: a signed payload (see ``signing``)
``{"v": 1, "tid": <token id>, "fp": <first 16 hex of the token's SHA-256>,
"sid": <32 random hex>, "exp": <unix time>}``. A session is accepted while its signature
holds, ``exp`` is in the future, it was not signed out, and the token it names is still
live (not revoked, still has the ``read`` or ``admin`` scope, and its hash still starts
with ``fp``, so a rebuilt database that reuses the id does not inherit old sessions).
Signing out records ``sid`` in ``signed_out_session`` (until ``exp``), so a copied
cookie dies with the original. The look-ups and their cache are the authenticator's
(``app.security.authenticator``), shared with bearer tokens: a revocation, or a sign-out
seen by another worker, ends sessions within ``CADENCE_TOKEN_CACHE_SECONDS`` without a
query per request.

CSRF (double submit): a random ``cadence_csrf`` cookie (SameSite=Strict) and, in each
state-changing form, a hidden ``csrf`` field holding HMAC(key, cookie value). A POST is
accepted only when the field is the MAC of the cookie it arrived with.
"""

from __future__ import annotations

import re
import secrets
import time
from dataclasses import dataclass
from typing import Any

from fastapi import Request, Response

from app.auth.service import TokenInfo
from app.security.signing import Signer
from app.security.throttle import Throttle
from app.settings import Settings

SESSION_COOKIE = "cadence_session"
CSRF_COOKIE = "cadence_csrf"
CSRF_FIELD = "csrf"
STATE_KEY = "cadence_session"  # request.state: the signed-in SignedIn, if any
READ_SCOPES = frozenset({"read", "admin"})
FINGERPRINT_CHARS = 16
SID_CHARS = 32
_CSRF_VALUE = re.compile(r"^[A-Za-z0-9_-]{32,64}$")

# The clock sessions expire by; tests move it (it is not time.time itself, so the
# HTTP client's own cookie jar keeps real time).
clock = time.time


@dataclass(frozen=True)
class SignedIn:
    """What templates know about the browser's session."""

    name: str
    csrf: str  # the hidden-field value for this browser's CSRF cookie


@dataclass(frozen=True)
class Claim:
    """What a well-signed, unexpired session cookie says."""

    token_id: int
    fingerprint: str
    sid: str
    expires: int

    @property
    def cache_key(self) -> str:
        return f"session:{self.token_id}:{self.fingerprint}:{self.sid}"


def fingerprint(token_hash: str) -> str:
    return token_hash[:FINGERPRINT_CHARS]


def can_read(token: TokenInfo) -> bool:
    return not READ_SCOPES.isdisjoint(token.scopes)


class Security:
    """Keys, cookie rules and the session cache of one application (``app.state.security``)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.sessions = Signer(settings.secret_key, "session")
        self.csrf = Signer(settings.secret_key, "csrf")
        self.max_age = max(1, int(settings.session_hours * 3600))
        # Wrong sign-in tokens per client, test sends per alert rule: a sliding minute
        # each, in one small bounded structure (app/security/throttle.py).
        self.sign_ins = Throttle(settings.login_failures_per_minute)
        self.alert_tests = Throttle(settings.alert_tests_per_minute)

    @property
    def token_mode(self) -> bool:
        return self.settings.read_access == "token"

    def secure(self, request: Request) -> bool:
        return request.url.scheme == "https" or self.settings.environment == "production"

    # --- sessions -------------------------------------------------------------------

    def issue(self, token: TokenInfo, token_hash: str) -> str:
        payload = {
            "v": 1,
            "tid": token.id,
            "fp": fingerprint(token_hash),
            "sid": secrets.token_hex(SID_CHARS // 2),
            "exp": int(clock()) + self.max_age,
        }
        return self.sessions.sign(payload)

    def parse(self, value: str | None) -> Claim | None:
        """The claim of a well-signed, unexpired session cookie, else None."""
        payload: dict[str, Any] | None = self.sessions.unsign(value or "")
        if payload is None or payload.get("v") != 1:
            return None
        tid, fp, exp = payload.get("tid"), payload.get("fp"), payload.get("exp")
        sid = payload.get("sid")
        if type(tid) is not int or type(exp) is not int or not isinstance(fp, str):
            return None
        if not isinstance(sid, str) or len(sid) != SID_CHARS:
            return None  # also a cookie issued before sign-out was recorded: sign in again
        if len(fp) != FINGERPRINT_CHARS or exp <= clock():
            return None
        return Claim(tid, fp, sid, exp)

    def set_session(self, response: Response, request: Request, value: str) -> None:
        response.set_cookie(
            SESSION_COOKIE,
            value,
            max_age=self.max_age,
            path="/",
            secure=self.secure(request),
            httponly=True,
            samesite="lax",
        )

    def clear_session(self, response: Response, request: Request) -> None:
        response.delete_cookie(
            SESSION_COOKIE, path="/", secure=self.secure(request), httponly=True, samesite="lax"
        )

    # --- CSRF -----------------------------------------------------------------------

    @staticmethod
    def csrf_cookie(request: Request) -> str | None:
        value = request.cookies.get(CSRF_COOKIE)
        return value if value and _CSRF_VALUE.match(value) else None

    @staticmethod
    def new_csrf() -> str:
        return secrets.token_urlsafe(32)

    def csrf_field(self, cookie: str) -> str:
        return self.csrf.mac(cookie)

    def csrf_ok(self, request: Request, field: str | None) -> bool:
        cookie = self.csrf_cookie(request)
        if cookie is None or not field or len(field) > 128 or not field.isascii():
            return False
        return self.csrf.verify_mac(cookie, field)

    def csrf_set_cookie_header(self, request: Request, value: str) -> str:
        """The Set-Cookie header value for a CSRF cookie (also used by the ASGI gate)."""
        response = Response()
        self.set_csrf(response, request, value)
        return response.headers["set-cookie"]

    def set_csrf(self, response: Response, request: Request, value: str) -> None:
        # Readable by nothing that matters: the page gets the MAC, not the cookie.
        response.set_cookie(
            CSRF_COOKIE,
            value,
            max_age=self.max_age,
            path="/",
            secure=self.secure(request),
            httponly=True,
            samesite="strict",
        )


def security_of(request: Request) -> Security:
    security: Security = request.app.state.security
    return security


def auth_state(request: Request) -> dict[str, Any] | None:
    """For base.html: who is signed in and the logout CSRF value (``user`` None: nobody),
    and ``open``: reads need no sign-in, which is for admins only."""
    security: Security | None = getattr(request.app.state, "security", None)
    if security is None:
        return None
    signed_in: SignedIn | None = getattr(request.state, STATE_KEY, None)
    if signed_in is None:
        return {"user": None, "csrf": None, "open": not security.token_mode}
    return {"user": signed_in.name, "csrf": signed_in.csrf, "open": not security.token_mode}
