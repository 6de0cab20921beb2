"""Browser and web security: response headers, read access (token mode), sign-in, CSRF.

- ``headers``: CSP, nosniff, frame and referrer policies, ``no-store``, on every response
  (``SecuredFastAPI`` puts them outside every other layer).
- ``authenticator``: the one place a bearer token or a session cookie is resolved;
  ``require_scope`` for the API's writes.
- ``gate``: in ``CADENCE_READ_ACCESS=token``, reads need a ``read`` token or a session.
- ``sessions``: the signed session cookie and the CSRF double submit; ``signing``: HMAC.
- ``router``: ``/login`` and ``/logout``.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request

from app.security.gate import AdminSessions, ReadAccessGate
from app.security.headers import SecuredFastAPI, SecurityHeaders
from app.security.router import router
from app.security.sessions import STATE_KEY, Security, SignedIn
from app.settings import Settings
from app.templating import templates

__all__ = ["SecuredFastAPI", "SecurityHeaders", "install_security"]


def install_security(app: FastAPI, settings: Settings) -> None:
    """Sign-in routes always; the read gate in token mode, admin sessions in open mode.
    Call after other middleware, so the gate answers before them."""
    app.state.security = Security(settings)
    if settings.read_access == "token":
        app.add_middleware(ReadAccessGate, security=app.state.security)
    else:
        app.add_middleware(AdminSessions, security=app.state.security)
    app.include_router(router)


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


templates.env.globals["auth_state"] = auth_state
