"""What the application needs of ``app.security``, installed by ``create_app``."""

from __future__ import annotations

from fastapi import FastAPI

from app.security.gate import AdminSessions, ReadAccessGate
from app.security.router import router
from app.security.sessions import Security, auth_state
from app.settings import Settings
from app.templating import templates


def install_security(app: FastAPI, settings: Settings) -> None:
    """Sign-in routes always; the read gate in token mode, admin sessions in open mode;
    ``auth_state`` for base.html. Call after other middleware, so the gate answers
    before them."""
    app.state.security = Security(settings)
    if settings.read_access == "token":
        app.add_middleware(ReadAccessGate, security=app.state.security)
    else:
        app.add_middleware(AdminSessions, security=app.state.security)
    app.include_router(router)
    templates.env.globals["auth_state"] = auth_state
