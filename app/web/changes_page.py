"""Change notes in the browser: everyone sees a pipeline's change points on
``/pipelines/{name}/changes``; an admin signed in (``/login``) declares, edits and deletes
notes through forms with the CSRF double submit. The forms and
``POST/PUT /api/v1/pipelines/{name}/changes`` accept the same values (the API's own
``ChangeNoteIn`` and checks), and every edit is in the settings history."""

from __future__ import annotations

import json
import re

from fastapi import APIRouter, Path, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from app.auth.service import TokenInfo
from app.db.engine import Database
from app.deps import DatabaseDep, ReadablePipeline, Viewer
from app.exceptions import CadenceError
from app.pipelines import notes
from app.pipelines.schemas import ChangeNoteIn
from app.pipelines.service import get_by_name
from app.security.router import CSRF_FAILED, read_form
from app.security.sessions import CSRF_FIELD, security_of
from app.templating import render_error_page, templates
from app.web.settings import Refused, admin_form_state, can_edit, field_errors

router = APIRouter(include_in_schema=False)
NOT_ADMIN = (
    "Only an admin can change the change notes: sign in with a token that has the admin "
    "scope (and, if it is limited to some pipelines, includes this one)."
)
DONE = {
    "created": "Change note added: the forecast starts after it.",
    "save": "Change note saved.",
    "delete": "Change note deleted.",
}
# A browser's datetime-local box sends no offset: the page says times are UTC.
NO_OFFSET = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2})?$")


def parse(form: dict[str, str]) -> tuple[ChangeNoteIn | None, dict[str, str]]:
    """The form as the API's ``ChangeNoteIn`` (a time without an offset is UTC), or None
    and a message per field."""
    at = form.get("at", "").strip()
    values = {
        "at": at + "+00:00" if NO_OFFSET.match(at) else at,
        "description": form.get("description", "").strip(),
    }
    try:
        # As JSON, so the form gets the API's strict types and refusals.
        return ChangeNoteIn.model_validate_json(json.dumps(values)), {}
    except ValidationError as exc:
        return None, field_errors(exc, "description")


def _page(
    request: Request,
    name: str,
    db: Database,
    viewer: TokenInfo | None,
    refused: Refused | None = None,
) -> HTMLResponse:
    state = admin_form_state(request, viewer, name, refused, DONE)
    with db.read() as session:
        pipeline = get_by_name(session, name)
        points = notes.change_points(session, pipeline)
    return templates.TemplateResponse(
        request,
        "changes.html",
        {"pipeline": pipeline, "points": points, **state},
        status_code=422 if state["errors"] else 200,
    )


@router.get("/pipelines/{name}/changes", response_class=HTMLResponse)
def changes_page(
    request: Request, name: ReadablePipeline, db: DatabaseDep, viewer: Viewer
) -> HTMLResponse:
    return _page(request, name, db, viewer)


def _refused(
    request: Request, form: dict[str, str], name: str, viewer: TokenInfo | None
) -> Response | None:
    if not security_of(request).csrf_ok(request, form.get(CSRF_FIELD)):
        return render_error_page(request, 403, CSRF_FAILED)
    if viewer is None or not can_edit(viewer, name):
        return render_error_page(request, 403, NOT_ADMIN)
    return None


def _write(
    db: Database,
    name: str,
    note_id: int | None,
    note: ChangeNoteIn | None,
    who: str,
    tolerance: float,
) -> None:
    with db.write() as session:
        pipeline = get_by_name(session, name)
        if note_id is None and note is not None:
            notes.declare(session, pipeline, note, who, tolerance_hours=tolerance)
        elif note_id is not None and note is not None:
            notes.edit(session, pipeline, note_id, note, who, tolerance_hours=tolerance)
        elif note_id is not None:
            notes.delete(session, pipeline, note_id, who)


async def _submit(
    request: Request, db: Database, name: str, viewer: TokenInfo | None, note_id: int | None
) -> Response:
    form = await read_form(request)
    if (refused := _refused(request, form, name, viewer)) is not None:
        return refused
    assert viewer is not None
    action = "delete" if form.get("action") == "delete" else ("save" if note_id else "created")
    note, errors = (None, {}) if action == "delete" else parse(form)
    if not errors:
        try:
            tolerance = request.app.state.settings.run_future_tolerance_hours
            await run_in_threadpool(_write, db, name, note_id, note, viewer.name, tolerance)
        except CadenceError as exc:  # a time too far ahead, a twin note, a missing note
            errors = {str(f["field"]): str(f["reason"]) for f in exc.fields} or {"at": exc.message}
    if errors:
        return await run_in_threadpool(_page, request, name, db, viewer, (form, errors))
    return RedirectResponse(f"/pipelines/{name}/changes?done={action}#notes", status_code=303)


@router.post("/pipelines/{name}/changes", response_class=HTMLResponse)
async def add_note(
    request: Request, name: ReadablePipeline, db: DatabaseDep, viewer: Viewer
) -> Response:
    return await _submit(request, db, name, viewer, None)


@router.post("/pipelines/{name}/changes/{note_id}", response_class=HTMLResponse)
async def change_note(
    request: Request,
    name: ReadablePipeline,
    db: DatabaseDep,
    viewer: Viewer,
    note_id: int = Path(ge=1, le=2**63 - 1),
) -> Response:
    return await _submit(request, db, name, viewer, note_id)
