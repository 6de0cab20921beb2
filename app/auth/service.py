"""API tokens: random, stored as SHA-256 hashes, scoped, revocable."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.auth import repository
from app.db.base import utcnow
from app.db.engine import WriteSession
from app.db.models import ApiToken
from app.exceptions import Conflict, Forbidden, Invalid, NotFound, Unauthorized
from app.schemas_common import identifier_error, nfc

SCOPES = ("ingest", "read", "admin")
TOKEN_PREFIX = "cad_"
LAST_USED_RESOLUTION = timedelta(seconds=60)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def parse_scopes(text: str | list[str]) -> list[str]:
    items = text if isinstance(text, list) else text.replace(",", " ").split()
    scopes = sorted({s.strip() for s in items if s.strip()})
    unknown = [s for s in scopes if s not in SCOPES]
    if unknown or not scopes:
        raise Invalid(f"scopes must be some of {', '.join(SCOPES)}; got {', '.join(items)!s}")
    return scopes


def create_token(
    session: WriteSession,
    name: str,
    scopes: str | list[str],
    pipelines: list[str] | None = None,
    *,
    rotate: bool = False,
) -> tuple[ApiToken, str]:
    """Create a token; returns the row and the secret, which is never stored. With
    ``rotate``, a token of that name gets a fresh secret (and these scopes and pipelines;
    a revoked one is live again) and the old secret stops working, in every process
    within the token cache's ttl: a setup line that creates a token is safe to run
    twice."""
    name = nfc(name.strip())
    if not name:
        raise Invalid("token name must not be empty")
    reason = identifier_error(name)
    if reason is not None:
        raise Invalid(f"token name {reason}", fields=[{"field": "name", "reason": reason}])
    secret = TOKEN_PREFIX + secrets.token_urlsafe(32)  # 256 random bits
    fields = {
        "scopes": " ".join(parse_scopes(scopes)),
        "token_hash": hash_token(secret),
        "prefix": secret[:10],
        "pipelines": pipelines or None,
    }
    row = repository.by_name(session, name) if rotate else None
    if row is not None:
        for key, value in {**fields, "revoked_at": None}.items():
            setattr(row, key, value)
        session.flush()
        return row, secret
    row = ApiToken(name=name, **fields)
    session.add(row)
    try:
        session.flush()
    except IntegrityError as exc:
        raise Conflict(
            f"a token named {name!r} already exists; add --rotate to give it a fresh secret "
            "(printed once; the old one stops working)"
        ) from exc
    return row, secret


def list_tokens(session: Session) -> list[ApiToken]:
    return repository.all_tokens(session)


def revoke_token(session: WriteSession, name: str) -> ApiToken:
    row = repository.by_name(session, name)
    if row is None:
        raise NotFound(f"no token named {name!r}")
    if row.revoked_at is None:
        row.revoked_at = utcnow()
    return row


@dataclass(frozen=True)
class TokenInfo:
    """What a request needs to know about its token (a snapshot, safe to cache)."""

    id: int
    name: str
    scopes: tuple[str, ...]
    pipelines: tuple[str, ...] | None
    last_used_at: datetime | None

    def allows(self, pipeline: str) -> bool:
        """Whether this token's ``--pipeline`` limit (if any) includes ``pipeline``."""
        return self.pipelines is None or pipeline in self.pipelines


def token_info(row: ApiToken) -> TokenInfo:
    return TokenInfo(
        id=row.id,
        name=row.name,
        scopes=tuple(row.scopes.split()),
        pipelines=tuple(row.pipelines) if row.pipelines is not None else None,
        last_used_at=row.last_used_at,
    )


def live_by_id(session: Session, token_id: int, fingerprint: str) -> TokenInfo | None:
    """The unrevoked token with this id whose hash starts with ``fingerprint`` (a
    session's token: a rebuilt database that reuses the id does not match)."""
    row = repository.by_id(session, token_id)
    if row is None or row.revoked_at is not None:
        return None
    if not hmac.compare_digest(row.token_hash[: len(fingerprint)], fingerprint):
        return None
    return token_info(row)


class TokenCache:
    """Verified tokens by hash for a few seconds, so most requests skip the look-up.

    A revocation reaches every process within ``ttl`` seconds. Only live tokens are
    cached; a bad token is looked up every time.
    """

    def __init__(self, ttl: float) -> None:
        self.ttl = ttl
        self._items: dict[str, tuple[float, TokenInfo]] = {}
        self._lock = threading.Lock()

    def get(self, digest: str) -> TokenInfo | None:
        if self.ttl <= 0:
            return None
        with self._lock:
            item = self._items.get(digest)
        if item is None or item[0] < time.monotonic():
            return None
        return item[1]

    def forget(self, digest: str) -> None:
        with self._lock:
            self._items.pop(digest, None)

    def put(self, digest: str, info: TokenInfo) -> None:
        if self.ttl <= 0:
            return
        with self._lock:
            if len(self._items) > 10_000:
                self._items.clear()
            self._items[digest] = (time.monotonic() + self.ttl, info)


def parse_bearer(authorization: str | None) -> str:
    if not authorization:
        raise Unauthorized("missing token: send `Authorization: Bearer <token>`")
    kind, _, secret = authorization.strip().partition(" ")
    secret = secret.strip()
    if kind.lower() == "bearer" and not secret:
        # What `Bearer $CADENCE_TOKEN` sends when the variable is empty or unset.
        raise Unauthorized(
            "empty token: the Authorization header says Bearer with no token after it "
            "(is the variable holding the token, e.g. CADENCE_TOKEN, set?)"
        )
    if kind.lower() != "bearer":
        raise Unauthorized("malformed Authorization header: expected `Bearer <token>`")
    return secret


def check_scope(token: TokenInfo, scope: str) -> TokenInfo:
    if scope not in token.scopes and "admin" not in token.scopes:
        raise Forbidden(
            f"token {token.name!r} lacks the {scope!r} scope (has: {', '.join(token.scopes)})"
        )
    return token


def lookup(session: Session, secret: str) -> TokenInfo:
    """The live token with this secret, or 401."""
    digest = hash_token(secret)
    row = repository.by_hash(session, digest)
    # The lookup is by hash; compare again in constant time so timing says nothing.
    if row is None or not hmac.compare_digest(row.token_hash, digest):
        raise Unauthorized("invalid token")
    if row.revoked_at is not None:
        raise Unauthorized("token has been revoked")
    return token_info(row)


def needs_touch(token: TokenInfo) -> bool:
    """Last-used times are kept to the minute: most requests write nothing."""
    return token.last_used_at is None or utcnow() - token.last_used_at > LAST_USED_RESOLUTION


def touch(session: WriteSession, token: TokenInfo) -> TokenInfo:
    """Record use (to the minute); returns the token with its new last-used time."""
    now = utcnow()
    stale = now - LAST_USED_RESOLUTION
    repository.touch(session, token.id, now, stale)
    return replace(token, last_used_at=now)


def check_pipeline_allowed(token: TokenInfo | None, pipeline: str) -> None:
    """403 unless the token's limit includes the pipeline (None: no token, no limit).

    Decided on the name alone, before the database is asked, so the answer is the same
    whether the pipeline exists or not: it reveals nothing about other pipelines.
    """
    if token is not None and not token.allows(pipeline):
        limit = ", ".join(token.pipelines or ())
        raise Forbidden(
            f"token {token.name!r} is limited to pipeline(s) {limit}; "
            f"it may not use pipeline {pipeline!r}",
            fields=[{"field": "pipeline", "reason": "outside the token's pipeline limit"}],
        )


def visible_pipelines(token: TokenInfo | None) -> tuple[str, ...] | None:
    """The pipeline names a request may see in lists, or None: every pipeline."""
    return None if token is None else token.pipelines
