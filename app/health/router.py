"""Liveness (/healthz) and readiness (/readyz) for load balancers and orchestrators."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from sqlalchemy.exc import SQLAlchemyError

from app.db.revision import schema_state

router = APIRouter(tags=["health"])


@router.get("/healthz")
def healthz() -> dict[str, str]:
    """The process is alive (no database check)."""
    return {"status": "ok"}


@router.get("/readyz")
def readyz(request: Request) -> JSONResponse:
    """Ready to serve: the database answers and its schema is at the migration head."""
    try:
        state = schema_state(request.app.state.database.engine)
    except SQLAlchemyError as exc:
        reason = str(exc).splitlines()[0][:200]
        return JSONResponse(
            {"status": "unavailable", "database": "unreachable", "detail": reason},
            status_code=503,
            headers={"Retry-After": "5"},
        )
    if not state.at_head:
        return JSONResponse(
            {"status": "unavailable", "database": "outdated", "detail": state.message()},
            status_code=503,
        )
    return JSONResponse({"status": "ok", "database": "ok", "revision": state.current})
