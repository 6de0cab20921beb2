"""Named dependencies, so route signatures read like sentences."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Annotated

from fastapi import Depends, Header, Path, Request
from starlette.concurrency import run_in_threadpool

from app.auth.service import (
    TokenCache,
    TokenInfo,
    check_pipeline_allowed,
    check_scope,
    hash_token,
    lookup,
    needs_touch,
    parse_bearer,
    touch,
)
from app.db.engine import Database
from app.errors import Invalid
from app.schemas_common import CONTROL_REASON
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
        return remember_token(
            request, check_scope(await authenticate(request, authorization), scope)
        )

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
require_ingest = require_scope("ingest")
require_admin = require_scope("admin")
Ingestor = Annotated[TokenInfo, Depends(require_ingest)]
Admin = Annotated[TokenInfo, Depends(require_admin)]

# --- pipeline limits (``cadence token create --pipeline``) ----------------------------
# A token's limit binds every scope. Reads know their token from the read gate (token
# mode: bearer or session); in open mode a read has no token and sees every pipeline.
TOKEN_STATE = "cadence_token"
PipelinePath = Annotated[str, Path(description="Pipeline slug", max_length=63)]


def remember_token(request: Request, token: TokenInfo) -> TokenInfo:
    """Keep the request's verified token on its state, where limits are read from."""
    request.scope.setdefault("state", {})[TOKEN_STATE] = token
    return token


async def request_token(request: Request) -> TokenInfo | None:
    """The token the request was authenticated with, or None (open read mode)."""
    token: TokenInfo | None = request.scope.get("state", {}).get(TOKEN_STATE)
    return token


async def readable_pipeline(
    name: PipelinePath, token: Annotated[TokenInfo | None, Depends(request_token)]
) -> str:
    """The ``{name}`` path parameter, when the request's token may see that pipeline."""
    check_pipeline_allowed(token, name)
    return name


async def admin_pipeline(name: PipelinePath, token: Admin) -> str:
    """The ``{name}`` path parameter, when an admin token may change that pipeline."""
    check_pipeline_allowed(token, name)
    return name


Viewer = Annotated[TokenInfo | None, Depends(request_token)]
ReadablePipeline = Annotated[str, Depends(readable_pipeline)]
AdminPipeline = Annotated[str, Depends(admin_pipeline)]


# NUL and other control characters in a path or query value: PostgreSQL refuses NUL in
# text (a 500 on almost every endpoint), and no slug, id or filter contains them.
CONTROL_IN_PARAM = re.compile(r"[\x00-\x1f\x7f-\x9f]")


async def refuse_control_characters(request: Request) -> None:
    """Every route's first dependency: a 422 naming the parameter, before any query."""
    params = [("path", k, v) for k, v in request.path_params.items() if isinstance(v, str)]
    params += [("query", k, v) for k, v in request.query_params.multi_items()]
    for where, name, value in params:
        if CONTROL_IN_PARAM.search(name) or CONTROL_IN_PARAM.search(value):
            field = name if not CONTROL_IN_PARAM.search(name) else f"{where} parameter name"
            raise Invalid(
                f"{field}: {CONTROL_REASON}", fields=[{"field": field, "reason": CONTROL_REASON}]
            )
