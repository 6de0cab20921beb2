"""The request id: from a sane incoming ``X-Request-ID``, else a fresh uuid4 hex."""

from __future__ import annotations

import re
import uuid
from contextvars import ContextVar

REQUEST_ID_HEADER = b"x-request-id"
SANE_REQUEST_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")

request_id_var: ContextVar[str | None] = ContextVar("cadence_request_id", default=None)


def choose_request_id(incoming: bytes | None) -> str:
    """The client's id when it is 1-64 characters of ``[A-Za-z0-9._-]``, else a new one."""
    if incoming is not None:
        try:
            text = incoming.decode("ascii")
        except UnicodeDecodeError:
            text = ""
        if SANE_REQUEST_ID.fullmatch(text):
            return text
    return uuid.uuid4().hex


def current_request_id() -> str | None:
    return request_id_var.get()
