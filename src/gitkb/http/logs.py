"""Request ids and ``gitkb serve --log-format json``: one JSON object per line on stderr.

Every record carries ``time`` (UTC, ISO 8601), ``level``, ``logger``, ``message`` and, when it was
written while a request was answered, that request's ``request_id``; the access line
(logger ``gitkb.http.access``, written by ``gitkb.http.metrics.RequestMeter``) adds ``method``,
``route`` (the route's template, never the raw path or its query), ``status``, ``duration_s`` and
``principal`` (a token's name, never its value). A bearer credential in any message or traceback
is replaced by ``[redacted]`` before the line is written.

The request id is the caller's ``X-Request-Id`` when it is a short token of safe characters, else
a new one; it is sent back in the ``X-Request-Id`` response header.
"""

from __future__ import annotations

import contextvars
import json
import logging
import re
import time
import uuid
from typing import Any

REQUEST_ID_HEADER = "X-Request-Id"
_SAFE_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
_SECRET = re.compile(r"(?i)\b(bearer\s+|(?:access_|private_)?token=)[^\s\"',;&]+")
ACCESS_FIELDS = ("method", "route", "status", "duration_s", "principal")

request_id_var: contextvars.ContextVar[str | None] = contextvars.ContextVar("gitkb_request_id", default=None)


def request_id_from(given: str | None) -> str:
    """The caller's id when it is safe to echo and log, else a fresh one."""
    if given and _SAFE_ID.match(given):
        return given
    return uuid.uuid4().hex


def redact(text: str) -> str:
    return _SECRET.sub(lambda m: f"{m.group(1)}[redacted]", text)


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": redact(record.getMessage()),
            "request_id": getattr(record, "request_id", None) or request_id_var.get(),
        }
        for name in ACCESS_FIELDS:
            if hasattr(record, name):
                out[name] = getattr(record, name)
        if record.exc_info:
            out["exception"] = redact(self.formatException(record.exc_info))
        return json.dumps(out, ensure_ascii=False, default=str)


def json_handler(level: str) -> logging.Handler:
    handler = logging.StreamHandler()  # stderr
    handler.setFormatter(JsonFormatter())
    handler.setLevel(level.upper())
    return handler


def uvicorn_log_config(level: str) -> dict[str, Any]:
    """uvicorn's own loggers in the JSON shape (its access log is off: ours has the request id)."""
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": JsonFormatter}},
        "handlers": {
            "stderr": {"class": "logging.StreamHandler", "formatter": "json", "stream": "ext://sys.stderr"}
        },
        "loggers": {
            "uvicorn": {"handlers": ["stderr"], "level": level.upper(), "propagate": False},
            "uvicorn.error": {"level": level.upper()},
            "uvicorn.access": {"handlers": [], "level": "WARNING", "propagate": False},
        },
    }


def use_json_logs(level: str) -> None:
    """Send the ``gitkb`` loggers' records to stderr as JSON lines (the crash log handler stays)."""
    root = logging.getLogger("gitkb")
    root.addHandler(json_handler(level))
    root.setLevel(min(root.level or logging.WARNING, logging.getLevelName(level.upper())))
