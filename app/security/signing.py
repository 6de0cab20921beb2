"""A tiny HMAC-SHA256 signer for cookie values (no third-party dependency).

A signed value is ``base64url(json payload) "." base64url(HMAC-SHA256(key, payload part))``.
Each purpose (sessions, CSRF) derives its own key from ``CADENCE_SECRET_KEY``, so a
value signed for one purpose never verifies for another. Signatures are compared in
constant time; anything malformed, oversized or tampered with reads as ``None``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import re
from typing import Any

MAX_SIGNED_LENGTH = 1024
_B64 = re.compile(r"^[A-Za-z0-9_-]+$")


def b64encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64decode(text: str) -> bytes | None:
    if not _B64.match(text):
        return None
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        return None


class Signer:
    """Signs and verifies small JSON payloads, and MACs short strings, for one purpose."""

    def __init__(self, secret: str, purpose: str) -> None:
        self._key = hmac.new(
            secret.encode(), b"cadence/" + purpose.encode(), hashlib.sha256
        ).digest()

    def mac(self, text: str) -> str:
        """``base64url(HMAC-SHA256(key, text))``."""
        return b64encode(hmac.new(self._key, text.encode(), hashlib.sha256).digest())

    def verify_mac(self, text: str, mac: str) -> bool:
        return hmac.compare_digest(self.mac(text).encode(), mac.encode())

    def sign(self, payload: dict[str, Any]) -> str:
        body = b64encode(json.dumps(payload, separators=(",", ":"), sort_keys=True).encode())
        return f"{body}.{self.mac(body)}"

    def unsign(self, value: str) -> dict[str, Any] | None:
        """The payload if ``value`` carries this signer's valid signature, else None."""
        if not value or len(value) > MAX_SIGNED_LENGTH or not value.isascii():
            return None
        body, dot, mac = value.partition(".")
        if not dot or not body or not mac or not self.verify_mac(body, mac):
            return None
        raw = b64decode(body)
        if raw is None:
            return None
        try:
            payload = json.loads(raw)
        except ValueError:
            return None
        return payload if isinstance(payload, dict) else None
