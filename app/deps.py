"""Named dependencies, so route signatures read like sentences."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from fastapi import Depends, Header, Request

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


def get_database(request: Request) -> Database:
    db: Database = request.app.state.database
    return db


def get_settings_dep(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


# Endpoints open their unit of work inside their own body (Database.transaction), so
# a connection or lock is never held across FastAPI's thread hops; see
# Database.transaction for the starvation this avoids.
DatabaseDep = Annotated[Database, Depends(get_database)]
SettingsDep = Annotated[Settings, Depends(get_settings_dep)]


def token_cache(request: Request) -> TokenCache:
    cache: TokenCache | None = getattr(request.app.state, "token_cache", None)
    if cache is None:
        cache = TokenCache(get_settings_dep(request).token_cache_seconds)
        request.app.state.token_cache = cache
    return cache


def require_scope(scope: str) -> Callable[..., TokenInfo]:
    """A dependency that authenticates the bearer token and checks one scope.

    Verified tokens are cached for ``token_cache_seconds``; a look-up and the throttled
    last-used update run in their own short transactions, finished before the
    endpoint starts its own unit of work.
    """

    def check(request: Request, authorization: Annotated[str | None, Header()] = None) -> TokenInfo:
        secret = parse_bearer(authorization)
        digest = hash_token(secret)
        cache = token_cache(request)
        token = cache.get(digest)
        if token is None:
            db = get_database(request)
            with db.transaction(write=False, primary=True) as session:  # never a replica
                token = lookup(session, secret)
            if needs_touch(token):
                with db.transaction(write=True) as session:
                    token = touch(session, token)
            cache.put(digest, token)
        return check_scope(token, scope)

    return check


Ingestor = Annotated[TokenInfo, Depends(require_scope("ingest"))]
Admin = Annotated[TokenInfo, Depends(require_scope("admin"))]
