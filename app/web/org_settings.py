"""The organisation's budget and risk tolerance in the browser (``/settings/org``): a
form for a signed-in admin whose token is not limited to some pipelines, the values for
everyone else. The POST carries the CSRF double submit of ``app.security``, as the
pipeline settings page does; the cadence plan reads what it stores."""

from __future__ import annotations

import math

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from app.auth.service import TokenInfo
from app.db.engine import Database
from app.deps import DatabaseDep, Viewer
from app.portfolio.plan import org_budget, set_org_budget
from app.security.router import CSRF_FAILED, read_form_body
from app.security.sessions import CSRF_FIELD, auth_state, security_of
from app.templating import render_error_page, templates

router = APIRouter(include_in_schema=False)
FIELDS = ("budget_usd", "risk")
NOT_ADMIN = (
    "Only an admin can change the org budget: sign in with a token that has the admin "
    "scope and is not limited to some pipelines."
)


def can_edit(viewer: TokenInfo | None) -> bool:
    return viewer is not None and "admin" in viewer.scopes and viewer.pipelines is None


def parse(form: dict[str, str]) -> tuple[tuple[float | None, float] | None, dict[str, str]]:
    """(budget or None to clear it, risk) from the form, or None and a message per field."""
    errors: dict[str, str] = {}
    extra = sorted(set(form) - set(FIELDS) - {CSRF_FIELD})
    if extra:
        errors["form"] = f"Unexpected field {', '.join(extra)[:200]}: reload the page."
    budget: float | None = None
    text = form.get("budget_usd", "").strip().replace(",", "")
    if text:
        try:
            budget = float(text)
        except ValueError:
            errors["budget_usd"] = "Enter a number of dollars a month, e.g. 50000"
        else:
            if not (math.isfinite(budget) and 0 <= budget <= 1e12):
                errors["budget_usd"] = "Enter an amount from 0 to 1,000,000,000,000"
    risk = 0.0
    try:
        risk = float(form.get("risk", "").strip())
    except ValueError:
        errors["risk"] = "Enter a share of months, e.g. 0.1 for 10%"
    else:
        if not 0 < risk < 1:
            errors["risk"] = "Enter a share between 0 and 1, e.g. 0.1 for 10%"
    return (None, errors) if errors else ((budget, risk), {})


# Packed by hand: one parameter a line repeats six lines of app/web/settings.py's _page.
def _page(request: Request, db: Database, viewer: TokenInfo | None,
          form: dict[str, str] | None = None, errors: dict[str, str] | None = None,
          status: int = 200) -> HTMLResponse:  # fmt: skip
    with db.read() as session:
        budget, risk = org_budget(session)
    auth = auth_state(request)
    values = {"budget_usd": "" if budget is None else f"{budget:g}", "risk": f"{risk:g}"}
    return templates.TemplateResponse(
        request,
        "org_settings.html",
        {
            "values": {**values, **(form or {})},
            "errors": errors or {},
            "editable": can_edit(viewer),
            "signed_in": bool(auth and auth["user"]),
            "csrf": auth["csrf"] if auth else None,
            "saved": request.query_params.get("saved"),
        },
        status_code=status,
    )


@router.get("/settings/org", response_class=HTMLResponse)
def org_settings_page(request: Request, db: DatabaseDep, viewer: Viewer) -> HTMLResponse:
    return _page(request, db, viewer)


def _save(db: Database, budget: float | None, risk: float, by: str) -> None:
    with db.write() as session:
        set_org_budget(session, budget, risk, by)


@router.post("/settings/org", response_class=HTMLResponse)
async def save_org_settings(request: Request, db: DatabaseDep, viewer: Viewer) -> Response:
    body = await read_form_body(request, max_bytes=4096, max_fields=8)
    if body.problem:
        return render_error_page(request, body.status, f"Nothing was saved: {body.problem}.")
    form = body.fields
    if not security_of(request).csrf_ok(request, form.get(CSRF_FIELD)):
        return render_error_page(request, 403, CSRF_FAILED)
    if viewer is None or not can_edit(viewer):
        return render_error_page(request, 403, NOT_ADMIN)
    parsed, errors = parse(form)
    if parsed is None:
        shown = {f: form.get(f, "") for f in FIELDS}
        return await run_in_threadpool(_page, request, db, viewer, shown, errors, 422)
    await run_in_threadpool(_save, db, parsed[0], parsed[1], viewer.name)
    return RedirectResponse("/settings/org?saved=1", status_code=303)
