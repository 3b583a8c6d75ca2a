"""The one HTTP envelope, for every JSON answer (built here and nowhere else).

Success: the library's dict as is, ``{"Success": true, ...}`` (``ok_body``/``respond``).
Error: the library's failure envelope at the top level, always with all five keys:

``{"Success": false, "Error": "<one sentence>", "code": "<stable code>",
"next_steps": [...], "details": {...}}``

The status comes from the code, in one table here (``STATUS_BY_CODE``: the
codes of ``gitkb.core.errors`` and the few codes only HTTP has, below). A Workspace call that answers
``Success: false`` becomes this shape with the call's other fields under
``details``; FastAPI's validation errors, unknown routes and methods,
oversize or non-JSON bodies, timeouts and crashes all come out the same way.

HTTP-only codes: ``payload_too_large`` 413, ``unsupported_media_type`` 415,
``method_not_allowed`` 405, ``timeout`` 504, ``not_implemented`` 501.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from gitkb.core.errors import GitkbError, write_crash_log

log = logging.getLogger("gitkb.http")


class PayloadTooLarge(GitkbError):
    code = "payload_too_large"


class UnsupportedMediaType(GitkbError):
    code = "unsupported_media_type"


class MethodNotAllowed(GitkbError):
    code = "method_not_allowed"


class RequestTimeout(GitkbError):
    code = "timeout"


class NotImplementedYet(GitkbError):
    code = "not_implemented"


HTTP_ONLY = (PayloadTooLarge, UnsupportedMediaType, MethodNotAllowed, RequestTimeout, NotImplementedYet)
# The HTTP status of every error code (the core's and HTTP's own); a code missing here answers 500.
STATUS_BY_CODE: dict[str, int] = {
    "invalid_argument": 400,
    "unauthorized": 401,
    "forbidden": 403,
    "not_found": 404,
    "conflict": 409,
    "busy": 409,
    "cancelled": 409,
    "managed_repo_guard": 409,
    "review_denied": 409,
    "too_large": 413,
    "validation": 422,
    "embedding_not_configured": 503,
    "store_unavailable": 503,
    "forge_error": 502,
    "lease_lost": 503,
    "internal": 500,
    "payload_too_large": 413,
    "unsupported_media_type": 415,
    "method_not_allowed": 405,
    "timeout": 504,
    "not_implemented": 501,
}
CODE_BY_STATUS: dict[int, str] = {
    400: "invalid_argument",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    415: "unsupported_media_type",
    422: "validation",
    501: "not_implemented",
    503: "store_unavailable",
    504: "timeout",
}
RESULT_KEYS = ("Success", "Error", "code", "next_steps")


def status_for(code: str) -> int:
    return STATUS_BY_CODE.get(code, 500)


ERROR_KEYS = ("Success", "Error", "code", "next_steps", "details")


def error_body(
    code: str, message: str, *, next_steps: list[str] | None = None, details: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The error envelope: ``Success: false``, ``Error``, ``code``, ``next_steps``, ``details``."""
    return {
        "Success": False,
        "Error": message,
        "code": code,
        "next_steps": [str(s) for s in next_steps or []],
        "details": jsonable_encoder(details or {}),
    }


def ok_body(**fields: Any) -> dict[str, Any]:
    """A success envelope for the few answers that are not a Workspace dict (health probes, pings)."""
    return {"Success": True, **jsonable_encoder(fields)}


# The error envelope every refused call answers (``error_body``), as OpenAPI documents it.
ERROR_ENVELOPE: dict[str, Any] = {
    "type": "object",
    "required": ["Success", "Error", "code", "next_steps", "details"],
    "properties": {
        "Success": {"const": False},
        "Error": {"type": "string", "examples": ["top_n is 31; this server's limit is 30"]},
        "code": {"type": "string", "examples": ["invalid_argument"]},
        "next_steps": {"type": "array", "items": {"type": "string"}},
        "details": {"type": "object"},
    },
}


def document_errors(app: FastAPI) -> None:
    """``app``'s OpenAPI documents each route's 422 as what it answers: the error envelope (code
    ``validation``, or ``invalid_argument`` for an unknown parameter), not FastAPI's
    ``HTTPValidationError`` (the schema is FastAPI's, rebuilt when the routes change)."""
    build = app.openapi

    def openapi() -> dict[str, Any]:
        schema = build()
        for path in schema.get("paths", {}).values():
            for op in path.values():
                bad = op.get("responses", {}).get("422") if isinstance(op, dict) else None
                if bad is not None:
                    bad["description"] = (
                        "validation: the request does not match the schema (invalid_argument: an"
                        " unknown parameter); the error envelope, details.errors lists each problem"
                    )
                    bad["content"] = {"application/json": {"schema": ERROR_ENVELOPE}}
        for name in ("HTTPValidationError", "ValidationError"):
            schema.get("components", {}).get("schemas", {}).pop(name, None)
        return schema

    app.openapi = openapi  # type: ignore[method-assign]


def error_response(
    code: str,
    message: str,
    *,
    status: int | None = None,
    next_steps: list[str] | None = None,
    details: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
    retry_after_s: int = 5,
) -> JSONResponse:
    status = status or status_for(code)
    hdrs = dict(headers or {})
    if code == "busy" and "Retry-After" not in hdrs:
        hdrs["Retry-After"] = str(retry_after_s)
    if status == 401:
        hdrs.setdefault("WWW-Authenticate", 'Bearer realm="gitkb"')
    body = error_body(code, message, next_steps=next_steps, details=details)
    return JSONResponse(body, status_code=status, headers=hdrs)


def from_exception(exc: GitkbError, retry_after_s: int = 5) -> JSONResponse:
    return error_response(
        exc.code,
        exc.message,
        next_steps=exc.next_steps,
        details=exc.details,
        retry_after_s=retry_after_s,
    )


def from_result(result: dict[str, Any], retry_after_s: int = 5) -> JSONResponse:
    """A ``Success: false`` dict from a Workspace call → the error shape."""
    code = str(result.get("code") or "internal")
    message = str(result.get("Error") or result.get("Message") or "failed")
    steps = result.get("next_steps")
    details = {k: v for k, v in result.items() if k not in RESULT_KEYS}
    return error_response(
        code,
        message,
        next_steps=list(steps) if isinstance(steps, list) else None,
        details=details or None,
        retry_after_s=retry_after_s,
    )


def respond(result: dict[str, Any], *, status: int = 200, retry_after_s: int = 5) -> JSONResponse:
    """A Workspace result as the HTTP answer: the dict itself on success, else the error shape."""
    if result.get("Success") is False:
        return from_result(result, retry_after_s)
    return JSONResponse({"Success": True, **jsonable_encoder(result)}, status_code=status)


def log_internal(home: Path | None, exc: BaseException) -> str:
    """Append the traceback to ``<home>/logs/gitkb.log`` (``write_crash_log``); returns where."""
    if home is None or write_crash_log(home, exc) is None:  # no home, or a read-only one
        log.error("internal error", exc_info=exc)
    return "the server log" if home is None else str(home / "logs" / "gitkb.log")


def _validation_message(errors: list[dict[str, Any]]) -> str:
    if not errors:
        return "the request is not valid"
    first = errors[0]
    loc = ".".join(str(p) for p in first.get("loc", ()) if p != "body") or "request"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{loc}: {first.get('msg', 'invalid')}{more}"


def install_handlers(app: FastAPI, home: Path | None) -> None:
    async def on_gitkb(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, GitkbError)
        state = getattr(request.app.state, "gitkb", None)
        return from_exception(exc, state.cfg.busy_retry_after_s if state else 5)

    async def on_validation(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        errors = [
            {"loc": list(e.get("loc", ())), "msg": e.get("msg", ""), "type": e.get("type", "")}
            for e in exc.errors()
        ]
        unknown = [str(e["loc"][-1]) for e in errors if e["type"] == "extra_forbidden" and e["loc"]]
        if unknown and len(unknown) == len(errors):  # unknown parameters: as on every interface
            return error_response(
                "invalid_argument",
                f"unknown parameter(s) {', '.join(unknown)}; see /docs or /openapi.json for what this route takes",
                details={"unknown_params": unknown, "errors": errors},
                next_steps=["send only the parameters the route takes"],
            )
        return error_response(
            "validation",
            _validation_message(errors),
            details={"errors": errors},
            next_steps=["see /docs or /openapi.json for the request schema"],
        )

    async def on_http(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        code = CODE_BY_STATUS.get(
            exc.status_code, "internal" if exc.status_code >= 500 else "invalid_argument"
        )
        message = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
        if exc.status_code == 404 and message == "Not Found":
            message = f"no route {request.method} {request.url.path}"
            steps = ["see /docs or /openapi.json for the routes"]
        elif exc.status_code == 405:
            message = f"{request.method} is not allowed on {request.url.path}"
            allow = {k.lower(): v for k, v in (exc.headers or {}).items()}.get("allow")
            steps = [f"allowed: {allow}" if allow else "see /docs or /openapi.json"]
        else:
            steps = []
        return error_response(
            code, message, status=exc.status_code, next_steps=steps, headers=dict(exc.headers or {})
        )

    async def on_crash(request: Request, exc: Exception) -> JSONResponse:
        where = log_internal(home, exc)
        return error_response("internal", f"internal error ({type(exc).__name__}); details in {where}")

    app.add_exception_handler(GitkbError, on_gitkb)
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(StarletteHTTPException, on_http)
    app.add_exception_handler(Exception, on_crash)
