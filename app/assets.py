"""Static files: read once, gzipped once, served with a content-hash in their URL.

A page links ``/static/cadence.css?v=<hash of the bytes>``. A request that carries
the current hash may be cached for a year (``immutable``): when the file changes, its
URL changes, so a browser never runs a stale script. A request without the hash (an
old bookmark, a hand-typed URL) is answered with ``no-cache`` and an ETag, so it is
revalidated. Every text asset is gzipped at start-up because the chart library is
1.2 MB as text but 0.4 MB on the wire, which is what a phone on a slow link pays.
"""

from __future__ import annotations

import gzip
import hashlib
import mimetypes
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import fastapi_offline
from fastapi import APIRouter, Request
from fastapi.responses import Response

from app.exceptions import NotFound
from app.settings import PROJECT_ROOT

STATIC_DIR = PROJECT_ROOT / "static"
SWAGGER_DIR = Path(fastapi_offline.__file__).parent / "static"
# Served from an installed package: the Swagger UI of /docs (nothing from a CDN).
PACKAGE_FILES = {
    "vendor/swagger-ui-bundle.js": SWAGGER_DIR / "swagger-ui-bundle.js",
    "vendor/swagger-ui.css": SWAGGER_DIR / "swagger-ui.css",
}
IMMUTABLE = "public, max-age=31536000, immutable"
REVALIDATE = "public, no-cache"
COMPRESSIBLE = ("text/", "application/javascript", "image/svg+xml", "application/json")

router = APIRouter(include_in_schema=False)


@dataclass(frozen=True)
class Asset:
    body: bytes
    gzipped: bytes | None  # None when compression would not help (already compressed)
    media_type: str
    version: str  # the first 12 hex digits of the SHA-256 of ``body``


def _media_type(name: str) -> str:
    if name.endswith(".js"):
        return "text/javascript"
    guessed, _ = mimetypes.guess_type(name)
    return guessed or "application/octet-stream"


def _load(path: Path, name: str) -> Asset:
    body = path.read_bytes()
    media_type = _media_type(name)
    packed = gzip.compress(body, compresslevel=9, mtime=0)
    worth_it = media_type.startswith(COMPRESSIBLE) and len(packed) < len(body)
    version = hashlib.sha256(body).hexdigest()[:12]
    return Asset(body, packed if worth_it else None, media_type, version)


def _source(name: str) -> Path | None:
    if name in PACKAGE_FILES:
        return PACKAGE_FILES[name]
    path = (STATIC_DIR / name).resolve()
    # Only files inside static/: "../" or an absolute name never leaves the folder.
    if STATIC_DIR.resolve() not in path.parents or not path.is_file():
        return None
    return path


@cache
def asset(name: str) -> Asset | None:
    """The asset called ``name`` (e.g. ``vendor/plotly-basic.min.js``), or None."""
    path = _source(name)
    return _load(path, name) if path is not None and path.exists() else None


def asset_url(name: str) -> str:
    """``/static/<name>?v=<hash>``: the URL templates use for every static file."""
    found = asset(name)
    if found is None:
        raise LookupError(f"no static file {name!r}")
    return f"/static/{name}?v={found.version}"


def accepts_gzip(header: str) -> bool:
    """True when an Accept-Encoding header allows gzip (and does not refuse it: q=0)."""
    for part in header.split(","):
        coding, _, params = part.strip().partition(";")
        if coding.strip().lower() in ("gzip", "*"):
            q = params.strip().removeprefix("q=").strip() if "q=" in params else "1"
            try:
                return float(q) > 0
            except ValueError:
                return False
    return False


@router.get("/static/{path:path}", name="static")
def static_file(request: Request, path: str) -> Response:
    found = asset(path)
    if found is None:
        raise NotFound(f"no static file {path!r}")
    etag = f'"{found.version}"'
    cache = IMMUTABLE if request.query_params.get("v") == found.version else REVALIDATE
    headers = {"Cache-Control": cache, "ETag": etag, "Vary": "Accept-Encoding"}
    if request.headers.get("if-none-match") == etag:
        return Response(status_code=304, headers=headers)
    body = found.body
    if found.gzipped is not None and accepts_gzip(request.headers.get("accept-encoding", "")):
        body = found.gzipped
        headers["Content-Encoding"] = "gzip"
    return Response(body, media_type=found.media_type, headers=headers)
