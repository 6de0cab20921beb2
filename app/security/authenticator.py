"""Who is calling: credentials are resolved here, and only here; each edge names a scope.

A credential is ``Authorization: Bearer <token>`` or, for a browser in
``CADENCE_READ_ACCESS=token`` mode, the signed session cookie (``sessions``). Both are
checked against the database on the primary (never a replica), and both are cached
for ``CADENCE_TOKEN_CACHE_SECONDS`` in one ``TokenCache`` per application, so most
requests make no query and a revocation reaches every process within that time.

Edges declare what they need:

- API routes: ``require_scope("ingest")`` (``app.deps`` names ``Ingestor``, ``Admin``);
- ``GET /metrics``: ``bearer(request, header, scope)`` with the configured scope;
- the read gate: ``credential(request, "read")``, a bearer token or a session.

Look-ups run in a worker thread, in their own short transactions, finished before the
endpoint opens its unit of work.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Annotated

from fastapi import Header, Request
from starlette.concurrency import run_in_threadpool

from app.auth.service import (
    TokenCache,
    TokenInfo,
    check_scope,
    hash_token,
    live_by_id,
    lookup,
    needs_touch,
    parse_bearer,
    touch,
)
from app.db.base import utcnow
from app.db.engine import Database
from app.security import repository
from app.security.sessions import SESSION_COOKIE, Claim, can_read, security_of


def token_cache(request: Request) -> TokenCache:
    """The application's cache of verified tokens and live sessions."""
    cache: TokenCache | None = getattr(request.app.state, "token_cache", None)
    if cache is None:
        cache = TokenCache(request.app.state.settings.token_cache_seconds)
        request.app.state.token_cache = cache
    return cache


def verify(db: Database, secret: str) -> TokenInfo:
    """Look the token up on the primary and record its use (to the minute)."""
    with db.read_latest() as session:  # never a replica: a revocation counts at once
        token = lookup(session, secret)
    if needs_touch(token):
        with db.write() as session:
            token = touch(session, token)
    return token


def live_session_token(db: Database, claim: Claim) -> TokenInfo | None:
    """The token a session names, if it and the session are still live; on the primary."""
    with db.read_latest() as session:
        if repository.is_signed_out(session, claim.sid):
            return None
        return live_by_id(session, claim.token_id, claim.fingerprint)


def record_sign_out(db: Database, claim: Claim) -> None:
    with db.write() as session:
        expires = datetime.fromtimestamp(claim.expires, UTC)
        repository.record_sign_out(session, claim.sid, expires, utcnow())


async def authenticate(request: Request, authorization: str | None) -> TokenInfo:
    """The live token of ``Authorization: Bearer ...``, verified (cached); 401 when
    missing, malformed, unknown or revoked."""
    secret = parse_bearer(authorization)
    digest = hash_token(secret)
    cache = token_cache(request)
    token = cache.get(digest)
    if token is None:  # a miss needs the database: do it in a worker thread
        token = await run_in_threadpool(verify, request.app.state.database, secret)
        cache.put(digest, token)
    return token


async def bearer(request: Request, authorization: str | None, scope: str) -> TokenInfo:
    """The bearer token of the request, verified and holding ``scope`` (else 403)."""
    return check_scope(await authenticate(request, authorization), scope)


async def bearer_if_sent(
    request: Request, authorization: Annotated[str | None, Header()] = None
) -> TokenInfo | None:
    """On reads: the bearer token when one is sent (a bad one is a 401), else None. Lets
    a read show admins more (e.g. full webhook URLs) without closing it to others."""
    return None if authorization is None else await authenticate(request, authorization)


async def session_token(request: Request) -> TokenInfo | None:
    """The live, read-capable token behind the request's session cookie, or None."""
    claim = security_of(request).parse(request.cookies.get(SESSION_COOKIE))
    if claim is None:
        return None
    cache = token_cache(request)
    token = cache.get(claim.cache_key)
    if token is None:
        token = await run_in_threadpool(live_session_token, request.app.state.database, claim)
        if token is None:
            return None
        cache.put(claim.cache_key, token)
    return token if can_read(token) else None


async def sign_out(request: Request) -> None:
    """End the request's session on the server too: copies of the cookie stop working
    at once in this worker, and in others within ``CADENCE_TOKEN_CACHE_SECONDS``."""
    claim = security_of(request).parse(request.cookies.get(SESSION_COOKIE))
    if claim is None:
        return
    await run_in_threadpool(record_sign_out, request.app.state.database, claim)
    token_cache(request).forget(claim.cache_key)


async def credential(request: Request, scope: str) -> tuple[TokenInfo, bool] | None:
    """(token, whether it came from a session cookie), or None: not signed in.

    A bearer token wins over a cookie; one that is bad or lacks ``scope`` raises
    (401/403), as on writes. A session always means the ``read`` scope.
    """
    authorization = request.headers.get("authorization")
    if authorization is not None:
        return await bearer(request, authorization, scope), False
    token = await session_token(request)
    return None if token is None else (token, True)


async def token_with_scope(request: Request, scope: str) -> TokenInfo:
    """What ``require_scope(scope)`` gives, for an endpoint that resolves its own
    credentials: the ingest routes, where FastAPI solving the dependency (its header
    parameter above all) cost more than the check itself (bench/README.md)."""
    authorization = request.headers.get("authorization")
    return remember_token(request, await bearer(request, authorization, scope))


def require_scope(scope: str) -> Callable[..., Awaitable[TokenInfo]]:
    """A dependency: the request's bearer token, holding ``scope`` (admin holds all).

    The token is kept on the request, where its pipeline limit is read from."""

    async def check(
        request: Request, authorization: Annotated[str | None, Header()] = None
    ) -> TokenInfo:
        return remember_token(request, await bearer(request, authorization, scope))

    return check


# The request's verified token, on ``request.state``: set by ``require_scope`` and by the
# read gate, read by ``request_token`` (a token's ``--pipeline`` limit binds every scope).
TOKEN_STATE = "cadence_token"


def remember_token(request: Request, token: TokenInfo) -> TokenInfo:
    """Keep the request's verified token on its state, where limits are read from."""
    request.scope.setdefault("state", {})[TOKEN_STATE] = token
    return token


async def request_token(request: Request) -> TokenInfo | None:
    """The token the request was authenticated with, or None (open read mode)."""
    token: TokenInfo | None = request.scope.get("state", {}).get(TOKEN_STATE)
    return token
