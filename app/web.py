"""The one Jinja2 environment, shared by every page."""

from __future__ import annotations

from fastapi import Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates

from app.settings import PROJECT_ROOT

TEMPLATES_DIR = PROJECT_ROOT / "templates"
STATIC_DIR = PROJECT_ROOT / "static"

templates = Jinja2Templates(directory=str(TEMPLATES_DIR))  # autoescape is on for .html


def render_error_page(
    request: Request, status: int, message: str, headers: dict[str, str] | None = None
) -> HTMLResponse:
    return templates.TemplateResponse(
        request,
        "error.html",
        {"status": status, "message": message},
        status_code=status,
        headers=headers,
    )
