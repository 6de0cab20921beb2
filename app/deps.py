"""Named dependencies, so route signatures read like sentences."""

from __future__ import annotations

import re
from typing import Annotated

from fastapi import Depends, Path, Request

from app.auth.service import TokenInfo, check_pipeline_allowed
from app.db.engine import Database
from app.exceptions import Invalid
from app.schemas_common import CONTROL_REASON, SLUG_PATTERN
from app.security.authenticator import bearer_if_sent, request_token, require_scope
from app.settings import Settings


# The app's database and settings, for endpoints that resolve them themselves (the
# ingest routes) and for the dependencies below.
def database_of(request: Request) -> Database:
    db: Database = request.app.state.database
    return db


def settings_of(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


# The trivial dependencies are ``async``: a plain ``def`` dependency costs a hop to a
# worker thread, and on the single-run ingest path those hops were ~45% of the time
# the workers held the interpreter (py-spy under load).
async def get_database(request: Request) -> Database:
    return database_of(request)


async def get_settings_dep(request: Request) -> Settings:
    return settings_of(request)


# Endpoints open their unit of work inside their own body (Database.transaction), so
# a connection or lock is never held across FastAPI's thread hops; see
# Database.transaction for the starvation this avoids.
DatabaseDep = Annotated[Database, Depends(get_database)]
SettingsDep = Annotated[Settings, Depends(get_settings_dep)]


# Each edge names the scope it needs; credentials are resolved by the authenticator.
require_ingest = require_scope("ingest")
require_admin = require_scope("admin")
Ingestor = Annotated[TokenInfo, Depends(require_ingest)]
Admin = Annotated[TokenInfo, Depends(require_admin)]

# --- pipeline limits (``cadence token create --pipeline``) ----------------------------
# A token's limit binds every scope. Reads know their token from the read gate (token
# mode: bearer or session); in open mode a read has no token and sees every pipeline.
PipelinePath = Annotated[
    str,
    Path(description="Pipeline slug", max_length=63, json_schema_extra={"pattern": SLUG_PATTERN}),
]


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


async def ingest_pipeline(name: PipelinePath, token: Ingestor) -> str:
    """The ``{name}`` path parameter, when an ingest (or admin) token may write to it."""
    check_pipeline_allowed(token, name)
    return name


Viewer = Annotated[TokenInfo | None, Depends(request_token)]
MaybeToken = Annotated[TokenInfo | None, Depends(bearer_if_sent)]
ReadablePipeline = Annotated[str, Depends(readable_pipeline)]
AdminPipeline = Annotated[str, Depends(admin_pipeline)]
IngestPipeline = Annotated[str, Depends(ingest_pipeline)]


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
