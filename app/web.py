"""The one Jinja2 environment, shared by every page."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import urlencode

import fastapi_offline
import plotly
from fastapi import Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates

from app.dashboard.figures_base import to_json
from app.settings import PROJECT_ROOT

TEMPLATES_DIR = PROJECT_ROOT / "templates"
STATIC_DIR = PROJECT_ROOT / "static"

templates = Jinja2Templates(directory=str(TEMPLATES_DIR))  # autoescape is on for .html
PLOTLY_JS = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
SWAGGER_DIR = Path(fastapi_offline.__file__).parent / "static"
VENDOR_FILES = {  # served from installed packages under /static/vendor/: no CDN at run time
    "plotly.min.js": (PLOTLY_JS, "text/javascript"),
    "swagger-ui-bundle.js": (SWAGGER_DIR / "swagger-ui-bundle.js", "text/javascript"),
    "swagger-ui.css": (SWAGGER_DIR / "swagger-ui.css", "text/css"),
}


def _missing(value: float | None) -> bool:
    return value is None or not math.isfinite(value)


def usd(value: float | None, digits: int = 0) -> str:
    """``1213.3`` -> ``$1,213``; missing or infinite -> an en dash."""
    return "–" if _missing(value) else f"${value:,.{digits}f}"


def pct(value: float | None, digits: int = 0) -> str:
    """A fraction as a percentage: ``0.38`` -> ``38%``."""
    return "–" if _missing(value) else f"{100 * value:.{digits}f}%"  # type: ignore[operator]


def num(value: float | None, digits: int = 1) -> str:
    return "–" if _missing(value) else f"{value:,.{digits}f}"


def measure(value: float | None, unit: str, signed: bool = False) -> str:
    """A gate number for people, in its unit: ``1308.8593, "usd_per_month"`` ->
    ``$1,309/month``; ``12.04, "points"`` -> ``12.0 points``; metrics to 3 significant
    digits (``0.004999`` -> ``0.005``)."""
    if _missing(value):
        return "–"
    assert value is not None
    if unit == "usd_per_month":
        return f"{usd(value)}/month"
    if unit == "points":
        return f"{value:+.1f} points" if signed else f"{value:.1f} points"
    return f"{value:+.3g}" if signed else f"{value:.3g}"


def with_query(query: Mapping[str, str], **changes: object) -> str:
    """``?a=1&b=2`` with ``changes`` applied: links that keep the rest of the view."""
    merged = {**query, **{k: str(v) for k, v in changes.items()}}
    return "?" + urlencode(merged)


templates.env.filters.update(usd=usd, pct=pct, num=num, measure=measure)
templates.env.globals["with_query"] = with_query
templates.env.globals["to_json"] = to_json


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
