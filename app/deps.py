"""Named dependencies, so route signatures read like sentences."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from app.auth.service import TokenInfo
from app.db.engine import Database
from app.security.authenticator import require_scope
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


# Each edge names the scope it needs; credentials are resolved by the authenticator.
Ingestor = Annotated[TokenInfo, Depends(require_scope("ingest"))]
Admin = Annotated[TokenInfo, Depends(require_scope("admin"))]
