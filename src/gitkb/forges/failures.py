"""One way to report a forge failure: ``ForgeError`` with a ``kind``.

``details`` always holds ``forge`` and ``kind``; ``status`` (the HTTP status)
when there was a response; ``reset_at`` (ISO 8601, UTC) and
``retry_after_s`` for rate limits. Messages are redacted before they are
stored: they never carry a token.

=================  =====================================================
kind               when
=================  =====================================================
``auth``           401, or 403 that is not a rate limit (bad or
                   under-scoped token, app not installed)
``not_found``      404: no such repository/project or change request
``rate_limit``     403/429 with ``X-RateLimit-Remaining: 0``,
                   ``Retry-After`` or a rate-limit message
``validation``     422 (and GitLab's 400): the forge refused the input
``already_exists`` a change request for that head already exists
                   (GitHub 422 "already exists", GitLab 409)
``conflict``       another 409
``server``         5xx
``connection``     refused, reset, DNS failure, timeout
``protocol``       a response the client library could not understand
``http``           any other HTTP status
=================  =====================================================
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from gitkb.core.errors import ForgeError

from .secrets import Secret, redact

AUTH = "auth"
NOT_FOUND = "not_found"
RATE_LIMIT = "rate_limit"
VALIDATION = "validation"
ALREADY_EXISTS = "already_exists"
CONFLICT = "conflict"
SERVER = "server"
CONNECTION = "connection"
PROTOCOL = "protocol"
HTTP = "http"

KINDS = (
    AUTH,
    NOT_FOUND,
    RATE_LIMIT,
    VALIDATION,
    ALREADY_EXISTS,
    CONFLICT,
    SERVER,
    CONNECTION,
    PROTOCOL,
    HTTP,
)

_NEXT_STEPS: dict[str, list[str]] = {
    AUTH: [
        "check the token named in the forge config (environment variable or secrets file)",
        "the token needs write access to pull/merge requests of the repository",
    ],
    NOT_FOUND: ["check the repository/project path and the api URL in the forge config"],
    RATE_LIMIT: ["wait until the reset time, then retry"],
    CONNECTION: ["check the forge's api URL and the network"],
    SERVER: ["the forge failed; retry later"],
}


def forge_error(
    forge: str,
    kind: str,
    message: str,
    *,
    secrets: Iterable[Secret | str | None] = (),
    status: int | None = None,
    **details: Any,
) -> ForgeError:
    """Build the redacted ``ForgeError`` for one failure."""
    info: dict[str, Any] = {"forge": forge, "kind": kind}
    if status is not None:
        info["status"] = status
    for key, value in details.items():
        if value is not None:
            info[key] = redact(value, secrets) if isinstance(value, str) else value
    return ForgeError(redact(message, secrets), details=info, next_steps=_NEXT_STEPS.get(kind))


def rate_limit_reset(
    headers: Mapping[str, str], now: float | None = None
) -> tuple[datetime | None, int | None]:
    """``(reset_at, retry_after_s)`` from rate-limit headers, either may be None.

    Reads ``Retry-After`` (seconds or an HTTP date), then GitHub's
    ``X-RateLimit-Reset`` / GitLab's ``RateLimit-Reset`` (epoch seconds).
    """
    now = time.time() if now is None else now
    h = {k.lower(): v for k, v in headers.items()}
    reset: float | None = None
    retry_after = h.get("retry-after")
    if retry_after:
        retry_after = retry_after.strip()
        if retry_after.isdigit():
            reset = now + int(retry_after)
        else:
            try:
                reset = email.utils.parsedate_to_datetime(retry_after).timestamp()
            except (TypeError, ValueError, IndexError):
                reset = None
    if reset is None:
        for name in ("x-ratelimit-reset", "ratelimit-reset"):
            value = h.get(name, "").strip()
            if value.isdigit():
                reset = float(value)
                break
    if reset is None:
        return None, None
    return datetime.fromtimestamp(int(reset), UTC), max(0, int(reset - now + 0.999))


def is_rate_limited(status: int, headers: Mapping[str, str], message: str = "") -> bool:
    """403/429 that means "slow down" (not "you may not")."""
    if status == 429:
        return True
    if status != 403:
        return False
    h = {k.lower(): v for k, v in headers.items()}
    remaining = h.get("x-ratelimit-remaining", h.get("ratelimit-remaining"))
    return remaining == "0" or "retry-after" in h or "rate limit" in message.lower()


def rate_limit_error(
    forge: str,
    status: int,
    headers: Mapping[str, str],
    message: str,
    *,
    secrets: Iterable[Secret | str | None] = (),
) -> ForgeError:
    reset_at, retry_after = rate_limit_reset(headers)
    when = (
        f"; resets at {reset_at.strftime('%Y-%m-%dT%H:%M:%SZ')} (in {retry_after} s)"
        if reset_at is not None
        else "; no reset time given"
    )
    return forge_error(
        forge,
        RATE_LIMIT,
        f"{forge}: rate limit exceeded ({status}): {message}{when}",
        secrets=secrets,
        status=status,
        reset_at=reset_at.strftime("%Y-%m-%dT%H:%M:%SZ") if reset_at else None,
        retry_after_s=retry_after,
        forge_message=message,
    )


def kind_for_status(status: int) -> str:
    if status == 401 or status == 403:
        return AUTH
    if status == 404:
        return NOT_FOUND
    if status in (400, 422):
        return VALIDATION
    if status == 409:
        return CONFLICT
    if status >= 500:
        return SERVER
    return HTTP


_KIND_WORDS = {
    AUTH: "authentication or permission refused",
    NOT_FOUND: "not found",
    VALIDATION: "the forge refused the request",
    ALREADY_EXISTS: "already exists",
    CONFLICT: "conflict",
    SERVER: "the forge had a server error",
    HTTP: "unexpected HTTP status",
}


def describe(kind: str) -> str:
    return _KIND_WORDS.get(kind, kind)


def connection_reason(exc: BaseException | None) -> str:
    """A short, value-free reason for a transport failure."""
    text = f"{type(exc).__name__}: {exc}"
    checks = (
        (("Connection refused", "Errno 111", "ECONNREFUSED"), "connection refused"),
        (("Timeout", "timed out"), "timed out"),
        (
            (
                "Name or service not known",
                "nodename nor servname",
                "getaddrinfo",
                "Temporary failure in name",
            ),
            "host name could not be resolved",
        ),
        (("Connection reset", "Errno 104", "RemoteDisconnected", "Connection aborted"), "connection reset"),
        (("SSLError", "CERTIFICATE_VERIFY_FAILED", "SSL:"), "TLS error"),
    )
    for needles, reason in checks:
        if any(n in text for n in needles):
            return reason
    return type(exc).__name__ if exc is not None else "connection failed"
