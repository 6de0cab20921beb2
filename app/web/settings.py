"""Pipeline settings in the browser: a form for admins, the values for everyone else.

An admin signed in with an admin token (``/login``, in either read-access mode) edits
the settings in ``app.pipelines.changes.EDITABLE``; the POST carries the CSRF double
submit of ``app.security``, is validated by the API's own ``PipelineUpdate`` (so the
form and ``PUT /api/v1/pipelines/{name}`` accept the same values), and every change is
recorded with who made it.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from app.auth.service import TokenInfo
from app.db.engine import Database
from app.deps import DatabaseDep, ReadablePipeline, Viewer
from app.exception_handlers import plain_reason
from app.pipelines import changes
from app.pipelines.schemas import PipelineUpdate
from app.pipelines.service import get_by_name
from app.security.router import CSRF_FAILED, read_form_body
from app.security.sessions import CSRF_FIELD, auth_state, security_of
from app.settings import Settings
from app.templating import render_error_page, templates

router = APIRouter(include_in_schema=False)
NULLABLE_FIELDS = ("monthly_budget_usd",)
NUMBER_FIELDS = (
    "monthly_budget_usd",
    "price_per_gpu_hour",
    "runs_per_week",
    "quality_margin",
)  # an empty box clears it ("no budget")
DESCRIPTIONS = "variant_descriptions"  # a text area: one "variant: description" per line
OPTIONAL_FIELDS = ("owner", DESCRIPTIONS)  # may be left empty
# Twenty variant descriptions of 200 non-ASCII characters (the API's limits) are ~60 KB
# once percent-encoded (a 4-byte character is 12 bytes of %XX): 8 KB lost such edits.
SETTINGS_FORM_BYTES = 128 * 1024
MAX_FORM_FIELDS = 64  # more than the form's own; the extra ones are named, not dropped
FORM_ERROR = "form"
NOT_ADMIN = (
    "Only an admin can change settings: sign in with a token that has the admin scope "
    "(and, if it is limited to some pipelines, includes this one)."
)


def can_edit(viewer: TokenInfo | None, name: str) -> bool:
    return viewer is not None and "admin" in viewer.scopes and viewer.allows(name)


Refused = tuple[dict[str, str], dict[str, str]]  # a form sent back: what was typed, errors


def admin_form_state(
    request: Request,
    viewer: TokenInfo | None,
    name: str,
    refused: Refused | None,
    done: dict[str, str],
) -> dict[str, Any]:
    """What a page with admin forms (alert rules, change notes) shows around them: whether
    the reader may edit, is signed in, the CSRF value, a refused form with its messages,
    and the words for what was just done (``?done=``)."""
    form, errors = refused or ({}, {})
    auth = auth_state(request)
    return {
        "editable": can_edit(viewer, name),
        "signed_in": bool(auth and auth["user"]),
        "csrf": auth["csrf"] if auth else None,
        "form": form,
        "errors": errors,
        "done": done.get(request.query_params.get("done", "")),
    }


def field_errors(exc: ValidationError, default: str) -> dict[str, str]:
    """A refused form's first message per field, in plain words (``default``: the field
    an error without a location is shown under)."""
    errors: dict[str, str] = {}
    for error in exc.errors():
        field = str(error["loc"][0]) if error["loc"] else default
        errors.setdefault(field, plain_reason(error))
    return errors


def descriptions_text(descriptions: dict[str, str] | None) -> str:
    """The text area's value: one ``variant: description`` line per variant."""
    return "\n".join(f"{k}: {v}" for k, v in sorted((descriptions or {}).items()))


def parse_descriptions(text: str) -> tuple[dict[str, str], str | None]:
    """``"candidate: sharded input\nbaseline: today's job"`` -> a dict, or the first
    line that is not ``variant: description`` as a message. Empty text clears them."""
    out: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        variant, colon, about = line.partition(":")
        if not colon or not variant.strip() or not about.strip():
            return {}, f"Line {number}: write it as variant: description"
        if variant.strip() in out:
            return {}, f"Line {number}: {variant.strip()} is described twice"
        out[variant.strip()] = about.strip()
    return out, None


def parse(form: dict[str, str]) -> tuple[PipelineUpdate | None, dict[str, str]]:
    """The form as a ``PipelineUpdate``, or None and a message per field."""
    values: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for field in changes.EDITABLE:
        text = form.get(field, "").strip()
        if field == DESCRIPTIONS:
            values[field], problem = parse_descriptions(text)
            if problem:
                errors[field] = problem
        elif text == "" and field in NULLABLE_FIELDS:
            values[field] = None
        elif field in NUMBER_FIELDS and text != "":
            try:  # the API takes JSON numbers, a form sends text
                values[field] = float(text)
            except ValueError:
                errors[field] = "Enter a number, e.g. 1400 or 2.5"
        elif text != "" or field == "owner":
            values[field] = text
    try:
        update = PipelineUpdate.model_validate(values)
    except ValidationError as exc:
        for error in exc.errors():
            loc = error["loc"]
            field = str(loc[0]) if loc else "form"
            message = plain_reason(error)
            if field == DESCRIPTIONS and len(loc) > 1:  # name the variant whose line is wrong
                message = f"{loc[1]}: {message}"
            errors.setdefault(field, message)
        update = None
    for field in changes.EDITABLE:
        if field not in values and field not in NULLABLE_FIELDS + OPTIONAL_FIELDS:
            errors.setdefault(field, "Enter a value")
    return (None, errors) if errors or update is None else (update, {})


def _page(
    request: Request,
    db: Database,
    name: str,
    viewer: TokenInfo | None,
    *,
    form: dict[str, str] | None = None,
    errors: dict[str, str] | None = None,
    status: int = 200,
) -> HTMLResponse:
    with db.read() as session:
        pipeline = get_by_name(session, name)
        values = changes.snapshot(pipeline)
        history = changes.recent(session, pipeline.id)
    auth = auth_state(request)
    return templates.TemplateResponse(
        request,
        "settings.html",
        {
            "pipeline": pipeline,
            "values": {**values, **(form or {})},
            "errors": errors or {},
            "fields": changes.EDITABLE,
            "history": history,
            "editable": can_edit(viewer, name),
            "signed_in": bool(auth and auth["user"]),
            "csrf": auth["csrf"] if auth else None,
            "saved": request.query_params.get("saved"),
            "descriptions_text": (form or {}).get(DESCRIPTIONS)
            or descriptions_text(pipeline.variant_descriptions),
        },
        status_code=status,
    )


@router.get("/pipelines/{name}/settings", response_class=HTMLResponse)
def settings_page(
    request: Request, name: ReadablePipeline, db: DatabaseDep, viewer: Viewer
) -> HTMLResponse:
    return _page(request, db, name, viewer)


def _save(
    db: Database, name: str, update: PipelineUpdate, settings: Settings, viewer: TokenInfo
) -> int:
    with db.write() as session:
        get_by_name(session, name)  # never create a pipeline from this form
        _, made = changes.apply(session, name, update, settings, viewer)
    return len(made)


@router.post("/pipelines/{name}/settings", response_class=HTMLResponse)
async def save_settings(
    request: Request, name: ReadablePipeline, db: DatabaseDep, viewer: Viewer
) -> Response:
    body = await read_form_body(request, max_bytes=SETTINGS_FORM_BYTES, max_fields=MAX_FORM_FIELDS)
    if body.problem:  # not a CSRF failure: say what is wrong with the body
        return render_error_page(request, body.status, f"Nothing was saved: {body.problem}.")
    form = body.fields
    if not security_of(request).csrf_ok(request, form.get(CSRF_FIELD)):
        return render_error_page(request, 403, CSRF_FAILED)
    if viewer is None or not can_edit(viewer, name):
        return render_error_page(request, 403, NOT_ADMIN)
    update, errors = parse(form)
    extra = sorted(set(form) - set(changes.EDITABLE) - {CSRF_FIELD})
    if extra:
        errors[FORM_ERROR] = (
            f"Unexpected field{'s' if len(extra) > 1 else ''} {', '.join(extra)[:200]}: this "
            "form takes only the settings below (reload the page if it is out of date)."
        )
        update = None
    if update is None:
        shown = {f: form.get(f, "") for f in changes.EDITABLE}
        return await run_in_threadpool(
            _page, request, db, name, viewer, form=shown, errors=errors, status=422
        )
    settings: Settings = request.app.state.settings
    count = await run_in_threadpool(_save, db, name, update, settings, viewer)
    return RedirectResponse(f"/pipelines/{name}/settings?saved={count}", status_code=303)
