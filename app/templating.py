"""The one Jinja2 environment, shared by every page (the web UI, sign-in, error pages).

Templates only embed finished results: filters format numbers, ``to_json`` embeds a
figure safely, ``with_query`` keeps a view's other parameters in a link."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlencode

from fastapi import Request
from fastapi.responses import HTMLResponse
from fastapi.templating import Jinja2Templates
from markupsafe import Markup, escape

from app.assets import asset_url
from app.planning.durations import duration
from app.settings import PROJECT_ROOT

TEMPLATES_DIR = PROJECT_ROOT / "templates"

templates = Jinja2Templates(directory=str(TEMPLATES_DIR))  # autoescape is on for .html


def _clean(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return [_clean(v) for v in value]
    return value


def to_json(fig: Mapping[str, Any]) -> str:
    """The figure as JSON safe to embed in ``<script type="application/json">``.

    NaN and +-inf become null (``allow_nan=False`` then guarantees valid JSON), and
    "<", ">" and "&" are written as \\u003c, \\u003e, \\u0026 so no string (a variant
    named ``</script>...``) can end the script element; ``JSON.parse`` restores them.
    """
    try:  # most figures hold no NaN: written as they are (a page's figures: ~10 ms less)
        text = json.dumps(fig, allow_nan=False, separators=(",", ":"))
    except (ValueError, TypeError):  # NaN or inf somewhere, or a mapping json cannot write
        text = json.dumps(_clean(fig), allow_nan=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _missing(value: float | None) -> bool:
    return value is None or not math.isfinite(value)


def usd(value: float | None, digits: int = 0) -> str:
    """``1213.3`` -> ``$1,213``; missing or infinite -> an en dash."""
    return "–" if _missing(value) else f"${value:,.{digits}f}"


def signed_usd(value: float | None) -> str:
    """A change in dollars with its sign: ``12.4`` -> ``+$12``, ``-80`` -> ``−$80``,
    ``0`` -> ``$0``."""
    if _missing(value):
        return "–"
    sign = "+" if value > 0.5 else "−" if value < -0.5 else ""  # type: ignore[operator]
    return f"{sign}${abs(value):,.0f}"  # type: ignore[arg-type]


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


def described(variant: str, descriptions: Mapping[str, str] | None) -> str:
    """A variant as people read it: ``candidate (sharded input + async checkpoints)``,
    or its bare name when the pipeline does not describe it."""
    about = (descriptions or {}).get(variant)
    return f"{variant} ({about})" if about else variant


def commands(text: str | None) -> Markup:
    """A message with its `commands` set as code, escaped: the API's words mark commands
    and fields with backticks, which a page shows as code, never as literal backticks.
    Example: "run `cadence demo`" -> "run <code>cadence demo</code>"."""
    escaped = str(escape(text or ""))
    return Markup(re.sub(r"`([^`]+)`", r"<code>\1</code>", escaped))


def with_query(query: Mapping[str, str], **changes: object) -> str:
    """``?a=1&b=2`` with ``changes`` applied: links that keep the rest of the view."""
    merged = {**query, **{k: str(v) for k, v in changes.items()}}
    return "?" + urlencode(merged)


templates.env.filters.update(
    usd=usd,
    pct=pct,
    num=num,
    measure=measure,
    signed_usd=signed_usd,
    described=described,
    duration=duration,  # every duration a page shows (app.planning.durations)
    commands=commands,
)
templates.env.globals["with_query"] = with_query
templates.env.globals["to_json"] = to_json
templates.env.globals["asset_url"] = asset_url


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
