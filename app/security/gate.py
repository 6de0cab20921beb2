"""Read access in ``CADENCE_READ_ACCESS=token`` mode: one ASGI gate in front of the routes.

Installed only in token mode (open mode pays nothing). Deny by default: every request
needs a read-capable credential except

- ``/healthz``, ``/readyz``, ``/login``, ``/logout`` and ``/static/...``;
- ``/metrics``, which follows ``CADENCE_METRICS_TOKEN_SCOPE`` instead;
- API writes (``POST``/``PUT``/``DELETE`` under ``/api/``, except ``POST /api/v1/plan``,
  which only reads), which keep their own ``ingest``/``admin`` checks.

A credential is ``Authorization: Bearer <token>`` with the ``read`` or ``admin`` scope,
or a valid session cookie, both resolved by ``app.security.authenticator``. Without
one, a browser asking for HTML is sent (303) to ``/login?next=<path>``; anything else
gets the usual 401 JSON error.
"""

from __future__ import annotations

import logging
from urllib.parse import urlencode

from fastapi import Request
from fastapi.responses import JSONResponse, RedirectResponse, Response
from sqlalchemy.exc import OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.auth.service import TokenInfo
from app.exception_handlers import (
    RETRY_LATER,
    cadence_error_body,
    database_down_body,
    wants_html,
)
from app.exceptions import CadenceError, Unauthorized
from app.security import authenticator
from app.security.sessions import SESSION_COOKIE, STATE_KEY, Security, SignedIn

log = logging.getLogger("cadence.security")

# /metrics has its own rule (CADENCE_METRICS_TOKEN_SCOPE), checked by its endpoint.
OPEN_PATHS = frozenset({"/healthz", "/readyz", "/login", "/logout", "/metrics"})
READ_METHODS = frozenset({"GET", "HEAD"})
READ_POSTS = frozenset({"/api/v1/plan"})
SIGN_IN_MESSAGE = (
    "sign-in required: send `Authorization: Bearer <token>` with a token that has the "
    "`read` scope, or sign in at /login"
)


def needs_read_access(method: str, path: str) -> bool:
    if path in OPEN_PATHS or path.startswith("/static/"):
        return False
    # An API write (not a read): its own scope check (ingest, admin) applies.
    write = path.startswith("/api/") and method not in READ_METHODS and path not in READ_POSTS
    return not write


def login_url(scope: Scope) -> str:
    target = scope["path"]
    if scope.get("query_string"):
        target += "?" + scope["query_string"].decode("latin-1")
    return "/login?" + urlencode({"next": target})


class ReadAccessGate:
    def __init__(self, app: ASGIApp, security: Security) -> None:
        self.app = app
        self.security = security

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not needs_read_access(scope["method"], scope["path"]):
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        try:
            credential = await authenticator.credential(request, "read")
        except CadenceError as exc:
            body = cadence_error_body(exc)
            await JSONResponse(body, exc.status_code, exc.headers)(scope, receive, send)
            return
        except (OperationalError, PoolTimeout) as exc:
            body = database_down_body(request, exc)
            await JSONResponse(body, 503, RETRY_LATER)(scope, receive, send)
            return
        if credential is None:
            await self._challenge(request)(scope, receive, send)
            return
        token, from_session = credential
        scope.setdefault("state", {})[authenticator.TOKEN_STATE] = token  # its limit binds reads
        new_csrf = self._remember(scope, request, token) if from_session else None
        if new_csrf is None:
            await self.app(scope, receive, send)
            return
        cookie = self.security.csrf_set_cookie_header(request, new_csrf).encode("latin-1")

        async def send_with_cookie(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [*message.get("headers", ()), (b"set-cookie", cookie)]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_cookie)

    def _remember(self, scope: Scope, request: Request, token: TokenInfo) -> str | None:
        """Put the session on request.state for templates; a CSRF cookie if it has none."""
        cookie = self.security.csrf_cookie(request)
        new = None
        if cookie is None:
            cookie = new = self.security.new_csrf()
        state = scope.setdefault("state", {})
        state[STATE_KEY] = SignedIn(name=token.name, csrf=self.security.csrf_field(cookie))
        return new

    def _challenge(self, request: Request) -> Response:
        response: Response
        if request.method in READ_METHODS and wants_html(request):
            response = RedirectResponse(login_url(request.scope), status_code=303)
        else:
            exc = Unauthorized(SIGN_IN_MESSAGE)
            response = JSONResponse(cadence_error_body(exc), exc.status_code, exc.headers)
        if SESSION_COOKIE in request.cookies:  # expired, tampered or revoked: drop it
            self.security.clear_session(response, request)
        return response


class AdminSessions:
    """Open read mode: reads need no credential, but an admin may sign in (``/login``
    takes only admin tokens there) to edit settings and alert rules in the browser.

    A request without a session cookie passes untouched (API clients pay nothing); with
    one, its live token is kept on the request as the read gate keeps it, so pages know
    the admin. An expired or revoked session is simply not signed in: reads stay open.
    """

    def __init__(self, app: ASGIApp, security: Security) -> None:
        self.app = app
        self.security = security

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].startswith("/static/"):
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        token = None
        if SESSION_COOKIE in request.cookies:
            try:
                token = await authenticator.session_token(request)
            except (OperationalError, PoolTimeout) as exc:  # reads are open: go on
                log.warning("database unavailable: %s", str(exc).splitlines()[0][:200])
        if token is not None:
            scope.setdefault("state", {})[authenticator.TOKEN_STATE] = token
            cookie = self.security.csrf_cookie(request)
            if cookie is not None:  # the sign-in set one; without it no form can post
                signed_in = SignedIn(name=token.name, csrf=self.security.csrf_field(cookie))
                scope["state"][STATE_KEY] = signed_in
        await self.app(scope, receive, send)
