"""Named dependencies, so route signatures read like sentences."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated

from fastapi import Depends, Header, Request
from starlette.concurrency import run_in_threadpool

from app.auth.service import (
    TokenCache,
    TokenInfo,
    check_scope,
    hash_token,
    lookup,
    needs_touch,
    parse_bearer,
    touch,
)
from app.db.engine import Database
from app.settings import Settings


# The trivial dependencies are ``async``: a plain ``def`` dependency costs a hop to a
# worker thread, and on the single-run ingest path those hops were ~45% of the time
# the workers held the interpreter (py-spy under load).
async def get_database(request: Request) -> Database:
    db: Database = request.app.state.database
    return db


async def get_settings_dep(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


# Endpoints open their unit of work inside their own body (Database.transaction), so
# a connection or lock is never held across FastAPI's thread hops; see
# Database.transaction for the starvation this avoids.
DatabaseDep = Annotated[Database, Depends(get_database)]
SettingsDep = Annotated[Settings, Depends(get_settings_dep)]


def verify(db: Database, secret: str) -> TokenInfo:
    """Look the token up on the primary and record its use (to the minute)."""
    with db.transaction(write=False, primary=True) as session:  # never a replica
        token = lookup(session, secret)
    if needs_touch(token):
        with db.transaction(write=True) as session:
            token = touch(session, token)
    return token


def token_cache(request: Request) -> TokenCache:
    cache: TokenCache | None = getattr(request.app.state, "token_cache", None)
    if cache is None:
        cache = TokenCache(request.app.state.settings.token_cache_seconds)
        request.app.state.token_cache = cache
    return cache


def require_scope(scope: str) -> Callable[..., Awaitable[TokenInfo]]:
    """A dependency that authenticates the bearer token and checks one scope.

    Verified tokens are cached for ``token_cache_seconds``; a look-up and the throttled
    last-used update run in their own short transactions, finished before the
    endpoint starts its own unit of work.
    """

    async def check(
        request: Request, authorization: Annotated[str | None, Header()] = None
    ) -> TokenInfo:
        return check_scope(await authenticate(request, authorization), scope)

    return check


async def authenticate(request: Request, authorization: str | None) -> TokenInfo:
    """The live token of ``Authorization: Bearer ...`` (401 when missing or bad)."""
    secret = parse_bearer(authorization)
    digest = hash_token(secret)
    cache = token_cache(request)
    token = cache.get(digest)
    if token is None:  # a miss needs the database: do it in a worker thread
        token = await run_in_threadpool(verify, request.app.state.database, secret)
        cache.put(digest, token)
    return token


async def bearer_if_sent(
    request: Request, authorization: Annotated[str | None, Header()] = None
) -> TokenInfo | None:
    """On reads: the bearer token when one is sent (a bad one is a 401), else None. Lets
    a read show admins more (e.g. full webhook URLs) without closing it to others."""
    return None if authorization is None else await authenticate(request, authorization)


MaybeToken = Annotated[TokenInfo | None, Depends(bearer_if_sent)]
Ingestor = Annotated[TokenInfo, Depends(require_scope("ingest"))]
Admin = Annotated[TokenInfo, Depends(require_scope("admin"))]
