"""Structured logs: one JSON object per line on stderr (or plain text for humans).

Only the ``cadence`` logger gets our handler (pytest's and anybody else's handlers on the
root logger are left alone); it keeps propagating so ``caplog`` still sees its records.
uvicorn's access log is switched off: the telemetry middleware writes one access line per
request itself (logger ``cadence.access``), with the route template and the request id.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any, TextIO

from app.observability.context import current_request_id

# Attributes every LogRecord has; anything else came in through ``extra=`` and is logged.
_STANDARD = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}
HANDLER_NAME = "cadence-observability"


class RequestIdFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "request_id", None) is None:
            record.request_id = current_request_id()
        return True


class JsonFormatter(logging.Formatter):
    """ts, level, logger, message, request_id, extras (e.g. the access line's fields)."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
            "request_id": getattr(record, "request_id", None) or current_request_id(),
        }
        for key, value in record.__dict__.items():
            if key not in _STANDARD and key not in out:
                out[key] = value
        if record.exc_info:
            out["exc_info"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str, ensure_ascii=False)


class TextFormatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        if getattr(record, "request_id", None) is None:
            record.request_id = current_request_id() or "-"
        return super().format(record)


class StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is at the time (pytest's capsys swaps it)."""

    def __init__(self) -> None:
        super().__init__()

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, _value: TextIO) -> None:
        pass


def configure_logging(log_format: str = "json", level: str = "info") -> logging.Handler:
    """Idempotent: replaces our handler on ``cadence`` rather than adding another."""
    logger = logging.getLogger("cadence")
    for old in [h for h in logger.handlers if h.get_name() == HANDLER_NAME]:
        logger.removeHandler(old)
    handler = StderrHandler()
    handler.set_name(HANDLER_NAME)
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    handler.addFilter(RequestIdFilter())
    logger.addHandler(handler)
    logger.setLevel(level.upper())
    # We write the access log ourselves; uvicorn's would be a second, unstructured line.
    logging.getLogger("uvicorn.access").disabled = True
    return handler
