"""The FastAPI application: routers, error handlers, middleware, lifespan."""

from __future__ import annotations

import gc
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from fastapi import Depends, FastAPI

from app.alerts.router import router as alerts_router
from app.alerts.sender import Sender
from app.alerts.sweeper import Sweeper
from app.analytics.router import router as analytics_router
from app.assets import router as assets_router
from app.billing.router import router as billing_router
from app.cadence.router import router as cadence_router
from app.db import kept_snapshot
from app.db.engine import Database, make_database
from app.db.revision import schema_state
from app.deps import refuse_control_characters
from app.evaluations.router import router as evaluations_router
from app.exception_handlers import install_error_handlers
from app.health.router import router as health_router
from app.measurements.router import router as measurements_router
from app.middleware import BodySizeLimit, Compression, JsonBodiesOnly
from app.observability.install import install_observability
from app.observability.logs import configure_logging
from app.openapi import install_openapi
from app.pipelines.router import router as pipelines_router
from app.portfolio.router import router as portfolio_router
from app.portfolio.warm import Warmer
from app.runs.router import router as runs_router
from app.security.headers import SecuredFastAPI
from app.security.install import install_security
from app.settings import Settings, get_settings
from app.web.alerts_page import router as alerts_page_router
from app.web.changes_page import router as changes_page_router
from app.web.org_settings import router as org_settings_router
from app.web.review import router as review_router
from app.web.router import router as pages_router
from app.web.runs_page import router as runs_page_router
from app.web.settings import router as settings_router

YOUNG_GENERATION = 10_000  # the collector's first threshold in a server (see lifespan)

log = logging.getLogger("cadence")

# Every router, in the order their routes are matched: a new one is added here. The
# static files come last (app.assets: gzipped, fingerprinted).
ROUTERS = (
    health_router,
    runs_router,
    pipelines_router,
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
    assets_router,
)


class SchemaNotAtHead(RuntimeError):
    pass


def create_app(settings: Settings | None = None, database: Database | None = None) -> FastAPI:
    settings = settings or get_settings()
    configure_logging(settings.log_format, settings.log_level)
    app = SecuredFastAPI(  # FastAPI with the security headers as its outermost layer
        title="Cadence",
        version="0.1.0",
        summary="What scheduled retraining costs, where the GPU time goes, "
        "and whether a faster cadence is affordable.",
        lifespan=_lifespan(settings, database),
        docs_url=None,  # /docs is served by app.web with Swagger UI from a package
        redoc_url=None,
        dependencies=[Depends(refuse_control_characters)],
    )
    app.state.settings = settings
    if database is not None:
        app.state.database = database
    install_error_handlers(app)
    app.add_middleware(JsonBodiesOnly)  # inside the size limit: a 413 comes first
    app.add_middleware(BodySizeLimit, max_bytes=settings.max_body_bytes)
    install_security(app, settings)  # /login, /logout; in token mode the read gate
    # Inside the telemetry layer, which counts the status and time of what is sent.
    app.add_middleware(Compression)
    # Outermost of the add_middleware layers: request id, metrics, access log, /metrics.
    install_observability(app)
    for router in ROUTERS:
        app.include_router(router)
    install_openapi(app)  # bearer scheme, error bodies, examples
    return app


Lifespan = Callable[[FastAPI], AbstractAsyncContextManager[None]]


def _lifespan(settings: Settings, database: Database | None) -> Lifespan:
    """The server's life: the database (made here unless a test passes its own), the
    schema check, the alert sender and sweeper, the warm start."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        db = database or make_database(settings)
        app.state.database = db
        reachable = _check_schema(db)
        run_sender = settings.alert_sender and not db.single_connection
        # Alert webhooks go out from here, never from a request; the sweeper evaluates
        # what an ingest left unjudged (a crash before its follow-up, a failed one).
        workers = (Sender(db, settings), Sweeper(db, settings)) if run_sender else ()
        for worker in workers:
            worker.start()
        # A shared single connection (the tests' rolled-back one) is not for a second thread.
        if settings.warm_start and not db.single_connection:
            minutes = settings.kept_snapshot_minutes
            # Read before serving (~1 s at 5,000 pipelines): the first reader finds them.
            loaded = kept_snapshot.load(db) if minutes and reachable else None
            app.state.kept_loaded = loaded
            app.state.warmer = Warmer(db, minutes, loaded=loaded is not None)
            app.state.warmer.start()
        if database is None:
            _tune_collector()
        yield
        for worker in reversed(workers):
            worker.stop()
        if hasattr(app.state, "warmer"):
            app.state.warmer.stop()
        if database is None:
            db.dispose()

    return lifespan


def _check_schema(db: Database) -> bool:
    """Refuse to serve a schema behind the code; an unreachable database is served (and
    /readyz says so); whether it was reached."""
    try:
        state = schema_state(db.engine)
    except Exception as exc:
        log.warning("database not reachable at startup: %s", str(exc).splitlines()[0])
        return False
    if not state.at_head:
        log.error("%s", state.message())
        raise SchemaNotAtHead(state.message())
    return True


def _tune_collector() -> None:
    # Everything alive now lives as long as the process (modules, Plotly's validators:
    # ~200,000 objects). Out of the collector's sight, a full collection on a page of
    # 5,000 pipelines took 10-20 ms instead of ~100 ms (bench/README.md, "Org phase").
    # Tests pass their own database: their objects stay collectable.
    gc.freeze()
    # A young generation of 10,000 objects, not 700: a 1,000-run page keeps more than
    # 700 objects alive at once, so each request promoted thousands towards a full
    # collection, which once the org-wide caches hold ~80,000 objects takes 30-40 ms
    # (the run list's p95: 60-70 ms against a p50 of 22). At 10,000 such a page triggers
    # no collection at all (bench/README.md, "Batches, and the targets all met").
    gc.set_threshold(YOUNG_GENERATION, *gc.get_threshold()[1:])
