"""Named dependencies, so route signatures read like sentences."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from fastapi import Depends, Header, Request

from app.auth.service import authenticate, needs_touch, touch
from app.db.engine import Database
from app.db.models import ApiToken
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


def require_scope(scope: str) -> Callable[..., ApiToken]:
    """A dependency that authenticates the bearer token and checks one scope.

    It runs its own short transactions (look-up, then a throttled last-used
    update), finished before the endpoint starts its own unit of work.
    """

    def check(request: Request, authorization: Annotated[str | None, Header()] = None) -> ApiToken:
        db = get_database(request)
        with db.transaction(write=False) as session:
            token = authenticate(session, authorization, scope)
        if needs_touch(token):
            with db.transaction(write=True) as session:
                touch(session, token)
        return token

    return check


Ingestor = Annotated[ApiToken, Depends(require_scope("ingest"))]
Admin = Annotated[ApiToken, Depends(require_scope("admin"))]
