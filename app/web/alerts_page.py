"""Alert rules in the browser: every reader sees them on ``/pipelines/{name}/alerts``; an
admin signed in (``/login``, in either read-access mode) adds, pauses, resumes, deletes
and test-sends them through forms with the CSRF double submit, each change audited
(``app.alerts.admin``). The form and ``POST /api/v1/pipelines/{name}/alerts`` accept the
same values (the API's own ``AlertRuleIn`` and checks)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Path, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from app.alerts import admin, service
from app.alerts.rules import AlertKind
from app.alerts.schemas import AlertRuleIn
from app.alerts.sender import WAKE
from app.auth.service import TokenInfo
from app.db.engine import Database
from app.deps import DatabaseDep, ReadablePipeline, Viewer
from app.exceptions import Invalid
from app.pipelines.service import get_by_name
from app.security.router import CSRF_FAILED, read_form
from app.security.sessions import CSRF_FIELD, security_of
from app.templating import render_error_page, templates
from app.web.settings import Refused, admin_form_state, can_edit, field_errors

router = APIRouter(include_in_schema=False)
ACTIONS = {"pause", "resume", "delete", "test"}
NOT_ADMIN = (
    "Only an admin can change alert rules: sign in with a token that has the admin scope "
    "(and, if it is limited to some pipelines, includes this one)."
)
KIND_LABELS = {
    AlertKind.COST_OVER_BUDGET: "The p90 bill (the bill at risk) over the budget (threshold: %)",
    AlertKind.GOODPUT_DROP: "Weekly goodput drops (threshold: percentage points)",
    AlertKind.UTILIZATION_FLOOR: "A run's GPU utilization below (threshold: a fraction, 0.4)",
    AlertKind.BUDGET_LIKELY_OVER: "This month likely over budget (threshold: % chance, 50)",
    AlertKind.WEEKLY_DIGEST: "Every Monday: the week that ended, what to fix first (threshold 0)",
}
DONE = {
    "created": "Alert rule added.",
    "pause": "Alert rule paused.",
    "resume": "Alert rule resumed: it is evaluated again within seconds.",
    "delete": "Alert rule deleted.",
    "test": "Test webhook queued: see its delivery below within a few seconds.",
}


def _page(
    request: Request,
    db: Database,
    name: str,
    viewer: TokenInfo | None,
    refused: Refused | None = None,
) -> HTMLResponse:
    """The page; ``refused``: a form sent back (what was typed, a message per field)."""
    state = admin_form_state(request, viewer, name, refused, DONE)
    with db.read() as session:
        pipeline = get_by_name(session, name)
        section = service.page_section(session, pipeline, limit=20)
        rules = service.list_rules(session, pipeline, admin=state["editable"])
    return templates.TemplateResponse(
        request,
        "alerts.html",
        {
            "pipeline": pipeline,
            "alerts": {**section, "rules": rules},
            "kinds": KIND_LABELS,
            **state,
        },
        status_code=422 if state["errors"] else 200,
    )


@router.get("/pipelines/{name}/alerts", response_class=HTMLResponse)
def alerts_page(
    request: Request, name: ReadablePipeline, db: DatabaseDep, viewer: Viewer
) -> HTMLResponse:
    return _page(request, db, name, viewer)


def parse(form: dict[str, str]) -> tuple[AlertRuleIn | None, dict[str, str]]:
    """The form as the API's ``AlertRuleIn``, or None and a message per field."""
    try:
        threshold: Any = float(form.get("threshold", "").strip())
    except ValueError:
        return None, {"threshold": "Enter a number, e.g. 100 (percent of budget) or 0.4"}
    values = {
        "kind": form.get("kind", ""),
        "threshold": threshold,
        "webhook_url": form.get("webhook_url", "").strip(),
        "enabled": form.get("enabled", "on") == "on",
    }
    try:
        return AlertRuleIn.model_validate(values), {}
    except ValidationError as exc:
        return None, field_errors(exc, "kind")


def _checked(
    request: Request, form: dict[str, str], name: str, viewer: TokenInfo | None
) -> Response | None:
    """The refusal of a POST without the CSRF value or an admin, else None."""
    if not security_of(request).csrf_ok(request, form.get(CSRF_FIELD)):
        return render_error_page(request, 403, CSRF_FAILED)
    if viewer is None or not can_edit(viewer, name):
        return render_error_page(request, 403, NOT_ADMIN)
    return None


def _create(db: Database, name: str, rule: AlertRuleIn, allowed: frozenset[str], who: str) -> None:
    with db.write() as session:
        admin.create(session, get_by_name(session, name), rule, allowed, who)
    service.forget_rule_index(db)


@router.post("/pipelines/{name}/alerts", response_class=HTMLResponse)
async def add_rule(
    request: Request, name: ReadablePipeline, db: DatabaseDep, viewer: Viewer
) -> Response:
    form = await read_form(request)
    if (refused := _checked(request, form, name, viewer)) is not None:
        return refused
    assert viewer is not None
    rule, errors = parse(form)
    if rule is not None:
        allowed = request.app.state.settings.webhook_allowed
        try:
            await run_in_threadpool(_create, db, name, rule, allowed, viewer.name)
        except Invalid as exc:  # the service's checks: a refused target, a bad threshold
            errors = {str(f["field"]): str(f["reason"]) for f in exc.fields or []}
            errors = errors or {"kind": exc.message}
    if errors:
        return await run_in_threadpool(_page, request, db, name, viewer, (form, errors))
    return RedirectResponse(f"/pipelines/{name}/alerts?done=created", status_code=303)


def _act(db: Database, name: str, rule_id: int, action: str, who: str) -> None:
    with db.write() as session:
        pipeline = get_by_name(session, name)
        if action == "test":
            admin.send_test(session, pipeline, rule_id, who)
        elif action == "delete":
            admin.delete(session, pipeline, rule_id, who)
        else:
            admin.set_enabled(session, pipeline, rule_id, action == "resume", who)
    if action == "test":
        WAKE.set()  # after the commit: the sender finds it at once
    else:
        service.forget_rule_index(db)


def _test_throttled(request: Request, rule: str) -> Response | None:
    """429 when the rule was test-sent CADENCE_ALERT_TESTS_PER_MINUTE times in the last
    minute (each sends a webhook: a free way to flood its target); else count this one."""
    throttle = security_of(request).alert_tests
    if wait := throttle.wait(rule):
        message = (
            f"This rule was sent {throttle.limit} tests in the last minute "
            f"(CADENCE_ALERT_TESTS_PER_MINUTE): try again in {wait} s."
        )
        return render_error_page(request, 429, message, headers={"Retry-After": str(wait)})
    throttle.add(rule)
    return None


@router.post("/pipelines/{name}/alerts/{rule_id}", response_class=HTMLResponse)
async def change_rule(
    request: Request,
    name: ReadablePipeline,
    db: DatabaseDep,
    viewer: Viewer,
    rule_id: int = Path(ge=1, le=2**31 - 1),
) -> Response:
    form = await read_form(request)
    if (refused := _checked(request, form, name, viewer)) is not None:
        return refused
    assert viewer is not None
    action = form.get("action", "")
    if action not in ACTIONS:
        return render_error_page(
            request, 422, f"Unknown action {action[:40]!r}: use one of the buttons."
        )
    if action == "test" and (refused := _test_throttled(request, f"{name}/{rule_id}")):
        return refused
    await run_in_threadpool(_act, db, name, rule_id, action, viewer.name)
    return RedirectResponse(f"/pipelines/{name}/alerts?done={action}#rules", status_code=303)
