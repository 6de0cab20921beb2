"""Browser sign-in with an API token: ``GET/POST /login``, ``POST /logout``.

Forms are ``application/x-www-form-urlencoded`` and parsed here (python-multipart is
not a dependency). Both POSTs check the CSRF double submit before anything else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated
from urllib.parse import parse_qs

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from app.auth.service import TokenInfo, hash_token
from app.exceptions import Unauthorized
from app.security.authenticator import session_token, sign_out, verify
from app.security.sessions import CSRF_FIELD, Security, can_read, security_of
from app.templating import render_error_page, templates

router = APIRouter(include_in_schema=False)
MAX_FORM_BYTES = 8192
MAX_TOKEN_CHARS = 512
CSRF_FAILED = (
    "This form has expired or was not sent from a Cadence page (the CSRF check failed). "
    "Nothing was changed; reload the page and try again."
)


def safe_next(target: str | None) -> str:
    """A same-site path to return to after signing in; anything else becomes ``/``.

    Only a path that starts with one ``/``: not ``//host`` or ``/\\host`` (both leave the
    site in a browser), and nothing browsers strip or reinterpret (control characters,
    spaces, backslashes, non-ASCII).
    """
    if not target or len(target) > 2048 or not target.startswith("/"):
        return "/"
    if target.startswith("//") or "\\" in target:
        return "/"
    if not target.isascii() or any(ord(c) <= 0x20 or ord(c) == 0x7F for c in target):
        return "/"
    return target


@dataclass(frozen=True)
class Form:
    """A urlencoded body's fields (the first value of each), or why it could not be read."""

    fields: dict[str, str]
    problem: str | None = None
    status: int = 200


async def read_form_body(request: Request, *, max_bytes: int, max_fields: int) -> Form:
    """The body as a form, or a ``problem`` and status (413 too large, 415 not a form,
    422 undecodable or too many fields) that a page reports as what it is."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type != "application/x-www-form-urlencoded":
        return Form({}, "the request is not a form (application/x-www-form-urlencoded)", 415)
    body = await request.body()
    if len(body) > max_bytes:
        return Form({}, f"the form is larger than {max_bytes // 1024} KB", 413)
    try:
        fields = parse_qs(body.decode("utf-8"), keep_blank_values=True, max_num_fields=max_fields)
    except UnicodeDecodeError:
        return Form({}, "the form is not UTF-8 text", 422)
    except ValueError:
        return Form({}, f"the form has more than {max_fields} fields", 422)
    return Form({name: values[0] for name, values in fields.items()})


async def read_form(request: Request) -> dict[str, str]:
    """The sign-in and sign-out forms' fields (empty when unreadable: the CSRF check
    then fails, which is all those two small forms can report)."""
    return (await read_form_body(request, max_bytes=MAX_FORM_BYTES, max_fields=10)).fields


def login_page(
    request: Request,
    security: Security,
    next_: str,
    *,
    error: str | None = None,
    status: int = 200,
    fresh: bool = False,
) -> HTMLResponse:
    """The sign-in form; sets a CSRF cookie when the browser has none, a bad one, or
    ``fresh`` asks for a new one."""
    cookie = None if fresh else security.csrf_cookie(request)
    new = cookie is None
    if cookie is None:
        cookie = security.new_csrf()
    response = templates.TemplateResponse(
        request,
        "login.html",
        {
            "next": next_,
            "csrf": security.csrf_field(cookie),
            "error": error,
            "session_hours": security.settings.session_hours,
            "open_reads": not security.token_mode,
        },
        status_code=status,
    )
    if new:
        security.set_csrf(response, request, cookie)
    return response


def redirect(target: str) -> RedirectResponse:
    return RedirectResponse(target, status_code=303)


@router.get("/login", response_class=HTMLResponse)
async def login_form(
    request: Request,
    next_: Annotated[str | None, Query(alias="next", max_length=2048)] = None,
) -> Response:
    security = security_of(request)
    target = safe_next(next_)
    if await session_token(request) is not None:
        return redirect(target)  # already signed in
    return login_page(request, security, target)


@router.post("/login", response_class=HTMLResponse)
async def login(request: Request) -> Response:
    security = security_of(request)
    form = await read_form(request)
    target = safe_next(form.get("next"))
    if not security.csrf_ok(request, form.get(CSRF_FIELD)):
        # A fresh CSRF cookie with the form, so signing in again just works.
        return login_page(request, security, target, error=CSRF_FAILED, status=403, fresh=True)
    secret = form.get("token", "").strip().removeprefix("Bearer ").strip()
    if not secret or len(secret) > MAX_TOKEN_CHARS:
        return login_page(request, security, target, error="Enter an API token.", status=401)
    client = request.client.host if request.client else "-"
    if wait := security.sign_ins.wait(client):
        return _throttled(request, security, target, wait)
    try:
        token: TokenInfo = await run_in_threadpool(verify, request.app.state.database, secret)
    except Unauthorized as exc:
        security.sign_ins.add(client)
        message = f"Sign-in failed: {exc.message}. Check the token and try again."
        return login_page(request, security, target, error=message, status=401)
    if not security.token_mode and "admin" not in token.scopes:
        message = (
            f"Sign-in failed: token {token.name!r} is not an admin token (scopes: "
            f"{', '.join(token.scopes)}). Reading needs no sign-in here; signing in is "
            "for admins, to edit settings and alerts."
        )
        return login_page(request, security, target, error=message, status=403)
    if not can_read(token):
        message = (
            f"Sign-in failed: token {token.name!r} has no read access (scopes: "
            f"{', '.join(token.scopes)}). Use a token with the read or admin scope."
        )
        return login_page(request, security, target, error=message, status=403)
    response = redirect(target)
    security.set_session(response, request, security.issue(token, hash_token(secret)))
    # A new CSRF value with the new session: a value planted before sign-in is useless.
    security.set_csrf(response, request, security.new_csrf())
    return response


def _throttled(request: Request, security: Security, target: str, wait: int) -> Response:
    """429: this client sent too many wrong tokens in the last minute."""
    limit = security.settings.login_failures_per_minute
    message = (
        f"Too many wrong tokens from this address ({limit} a minute, "
        f"CADENCE_LOGIN_FAILURES_PER_MINUTE): try again in {wait} s."
    )
    response = login_page(request, security, target, error=message, status=429)
    response.headers["Retry-After"] = str(wait)
    return response


@router.post("/logout")
async def logout(request: Request) -> Response:
    security = security_of(request)
    form = await read_form(request)
    if not security.csrf_ok(request, form.get(CSRF_FIELD)):
        return render_error_page(request, 403, CSRF_FAILED)
    await sign_out(request)
    response = redirect("/login" if security.token_mode else "/")
    security.clear_session(response, request)
    return response
