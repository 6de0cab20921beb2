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
from app.db.engine import Database
from app.security.sessions import SESSION_COOKIE, can_read, security_of


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


def live_session_token(db: Database, token_id: int, fingerprint: str) -> TokenInfo | None:
    with db.read_latest() as session:
        return live_by_id(session, token_id, fingerprint)


async def bearer(request: Request, authorization: str | None, scope: str) -> TokenInfo:
    """The bearer token of the request, verified (cached) and holding ``scope``.

    Missing, malformed, unknown or revoked: 401; without the scope: 403.
    """
    secret = parse_bearer(authorization)
    digest = hash_token(secret)
    cache = token_cache(request)
    token = cache.get(digest)
    if token is None:  # a miss needs the database: do it in a worker thread
        token = await run_in_threadpool(verify, request.app.state.database, secret)
        cache.put(digest, token)
    return check_scope(token, scope)


async def session_token(request: Request) -> TokenInfo | None:
    """The live, read-capable token behind the request's session cookie, or None."""
    parsed = security_of(request).parse(request.cookies.get(SESSION_COOKIE))
    if parsed is None:
        return None
    key = f"session:{parsed[0]}:{parsed[1]}"
    cache = token_cache(request)
    token = cache.get(key)
    if token is None:
        token = await run_in_threadpool(live_session_token, request.app.state.database, *parsed)
        if token is None:
            return None
        cache.put(key, token)
    return token if can_read(token) else None


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


def require_scope(scope: str) -> Callable[..., Awaitable[TokenInfo]]:
    """A dependency: the request's bearer token, holding ``scope`` (admin holds all)."""

    async def check(
        request: Request, authorization: Annotated[str | None, Header()] = None
    ) -> TokenInfo:
        return await bearer(request, authorization, scope)

    return check
