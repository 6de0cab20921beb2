"""Feature routers beyond ingestion: planning API and pages."""

from __future__ import annotations

from fastapi import APIRouter


def all_routers() -> list[APIRouter]:
    from app.alerts.router import router as alerts_router
    from app.analytics.router import router as analytics_router
    from app.billing.router import router as billing_router
    from app.cadence.router import router as cadence_router
    from app.evaluations.router import router as evaluations_router
    from app.measurements.router import router as measurements_router
    from app.portfolio.router import router as portfolio_router
    from app.web.alerts_page import router as alerts_page_router
    from app.web.changes_page import router as changes_page_router
    from app.web.org_settings import router as org_settings_router
    from app.web.review import router as review_router
    from app.web.router import router as pages_router
    from app.web.runs_page import router as runs_page_router
    from app.web.settings import router as settings_router

    return [
        analytics_router,
        cadence_router,
        evaluations_router,
        measurements_router,
        portfolio_router,
        billing_router,
        alerts_router,
        pages_router,
        review_router,
        settings_router,
        org_settings_router,
        alerts_page_router,
        changes_page_router,
        runs_page_router,
    ]
