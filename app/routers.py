"""Feature routers beyond ingestion: planning API and pages."""

from __future__ import annotations

from fastapi import APIRouter


def all_routers() -> list[APIRouter]:
    from app.pages.router import router as pages_router

    return [pages_router]
