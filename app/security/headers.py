"""Security headers on every response: a pure ASGI wrapper, a few appended byte pairs."""

from __future__ import annotations

from fastapi import FastAPI
from starlette.types import ASGIApp, Message, Receive, Scope, Send

# Scripts only from this server (the pages have no inline script; figures travel as
# <script type="application/json">, which is data and never executed). Plotly.js sets
# inline style attributes on the charts it draws, hence 'unsafe-inline' for styles.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data:; font-src 'self' data:; connect-src 'self'; "
    "frame-ancestors 'none'; base-uri 'self'; form-action 'self'; object-src 'none'"
)
SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"same-origin"),
)
NO_STORE = (b"cache-control", b"no-store")


class SecurityHeaders:
    """Adds the headers above to every HTTP response that does not set them itself.

    ``Cache-Control: no-store`` goes on everything outside ``/static/`` that has no
    Cache-Control of its own (pages, API JSON, CSV, errors): they may hold data a
    shared cache must not keep. Static files keep the caching ``app.assets`` gives them
    (a year for a fingerprinted URL, revalidation otherwise).
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        cacheable = scope["path"].startswith("/static/")

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", ()))
                present = {name.lower() for name, _ in headers}
                headers.extend(h for h in SECURITY_HEADERS if h[0] not in present)
                if not cacheable and NO_STORE[0] not in present:
                    headers.append(NO_STORE)
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)


class SecuredFastAPI(FastAPI):
    """FastAPI with ``SecurityHeaders`` outside every other layer.

    Outermost, so that even the 500 answer of Starlette's ServerErrorMiddleware (which
    sits outside all ``add_middleware`` layers) and the 413 of the body limit carry
    the headers.
    """

    def build_middleware_stack(self) -> ASGIApp:
        return SecurityHeaders(super().build_middleware_stack())
