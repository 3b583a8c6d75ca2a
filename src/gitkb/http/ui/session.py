"""Who is looking at the page, and whether a form really came from it.

* Login: the API's bearer token, posted once to ``/ui/login`` and kept in an HTTP-only,
  ``SameSite=Strict`` cookie scoped to ``/ui``. Every request checks it exactly as the API checks
  its ``Authorization`` header (``gitkb.http.auth.authenticate``: constant-time digests, scopes);
  the token's name is the principal, so it is the reviewer recorded on approve and deny. A token
  bound to an agent is refused here (agents use the MCP server). With no token configured the
  page, like the API, is open to loopback only and asks for no login.
* CSRF: every state-changing form carries ``csrf_token`` = HMAC(secret, a random nonce kept in
  its own HTTP-only cookie + the session token's digest). A POST without the cookie, with another
  session's token, or from another host (``Origin``/``Referer`` checked when sent) is refused 403.
  The secret lives in ``<home>/ui-secret`` (0600), so forms survive a restart and work on every
  server of a workspace; a read-only home falls back to a secret of this process.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

from fastapi import Request
from starlette.datastructures import FormData

from gitkb.core.errors import Forbidden, GitkbError, Unauthorized
from gitkb.http.auth import Principal, authenticate
from gitkb.http.state import get_state

SESSION_COOKIE = "gitkb_session"
CSRF_COOKIE = "gitkb_csrf"
CSRF_FIELD = "csrf_token"
COOKIE_PATH = "/ui"
SESSION_MAX_AGE_S = 12 * 3600


SECRET_FILE = "ui-secret"


def load_secret(home: Path) -> bytes:
    """The workspace's CSRF signing secret, made once (0600); a process secret if home is read-only."""
    path = home / SECRET_FILE
    for _ in range(2):
        try:
            data = path.read_bytes()
            if len(data) >= 32:
                return data
        except FileNotFoundError:
            pass
        except OSError:
            break
        try:
            home.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            continue  # another server made it first: read theirs
        except OSError:
            break
        with os.fdopen(fd, "wb") as fh:
            fh.write(secrets.token_bytes(32))
    return secrets.token_bytes(32)


@dataclass
class UiState:
    """What the page keeps per app: the templates, and the CSRF signing secret (read on first use)."""

    home: Path
    templates: Any = None
    _secret: bytes | None = field(default=None, repr=False)

    @property
    def secret(self) -> bytes:
        if self._secret is None:
            self._secret = load_secret(self.home)
        return self._secret


class UiRedirect(Exception):
    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.url = url


def ui_state(request: Request) -> UiState:
    state = getattr(request.app.state, "gitkb_ui", None)
    if not isinstance(state, UiState):  # pragma: no cover - mount_ui always sets it
        raise GitkbError("the web page is not mounted")
    return state


def auth_enabled(request: Request) -> bool:
    return get_state(request).cfg.auth_enabled


def client_host(request: Request) -> str | None:
    return request.client.host if request.client else None


def check_token(request: Request, token: str) -> Principal:
    """The principal of a presented token (raises ``Unauthorized``/``Forbidden``)."""
    p = authenticate(get_state(request).cfg, f"Bearer {token}", client_host(request))
    if p.agent:
        raise Forbidden(
            f"token {p.name!r} is bound to agent {p.agent!r}; the web page is for operators and reviewers",
            next_steps=["log in with an operator or reviewer token"],
        )
    return p


def viewer(request: Request) -> Principal | None:
    """The logged-in principal, the local one when no token is configured, else None."""
    cached = getattr(request.state, "ui_principal", None)
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    cfg = get_state(request).cfg
    if not cfg.auth_enabled:
        p: Principal | None = authenticate(cfg, None, client_host(request))  # loopback only
    else:
        token = request.cookies.get(SESSION_COOKIE, "")
        try:
            p = check_token(request, token) if token else None
        except (Unauthorized, Forbidden):
            p = None
    request.state.ui_principal = p
    return p


def safe_next(target: str | None) -> str:
    """Only a path of this page may be a post-login destination (no open redirect)."""
    if not target or not target.startswith("/ui") or target.startswith("//") or "\\" in target:
        return "/ui"
    parts = urlsplit(target)
    if parts.scheme or parts.netloc:
        return "/ui"
    return target


def require_page(request: Request, scope: str = "read") -> Principal:
    """The principal for a page that needs ``scope``; otherwise off to the login form (or 403)."""
    p = viewer(request)
    if p is None:
        here = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        raise UiRedirect(f"/ui/login?next={quote(safe_next(here), safe='')}")
    if not p.has(scope):
        raise Forbidden(
            f"token {p.name!r} lacks the {scope!r} scope",
            details={"required_scope": scope, "token_scopes": sorted(p.scopes)},
            next_steps=[f"log in with a token that has the {scope!r} scope"],
        )
    return p


# -- CSRF ------------------------------------------------------------------------------------


def _session_digest(request: Request) -> str:
    token = request.cookies.get(SESSION_COOKIE, "") if auth_enabled(request) else ""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def _nonce(request: Request) -> str:
    nonce = request.cookies.get(CSRF_COOKIE) or getattr(request.state, "ui_new_nonce", None)
    if not nonce:
        nonce = secrets.token_urlsafe(24)
        request.state.ui_new_nonce = nonce
    return str(nonce)


def sign(secret: bytes, nonce: str, session: str) -> str:
    return hmac.new(secret, f"{nonce}|{session}".encode(), hashlib.sha256).hexdigest()


def csrf_token(request: Request) -> str:
    """The token for this page's forms: bound to the nonce cookie and to the session."""
    return sign(ui_state(request).secret, _nonce(request), _session_digest(request))


def same_origin(request: Request) -> bool:
    """A browser's ``Origin`` (or, without it, ``Referer``) must name this server's host and port
    (the scheme is not compared: a TLS proxy in front changes it)."""
    origin = request.headers.get("origin")
    if origin is None or origin == "null":
        origin = request.headers.get("referer")
        if not origin:
            return request.headers.get("origin") is None  # no header at all: not a browser's cross-site post
    netloc = urlsplit(origin).netloc.lower()
    return bool(netloc) and hmac.compare_digest(netloc, request.headers.get("host", "").lower())


def check_csrf(request: Request, form: FormData) -> None:
    nonce = request.cookies.get(CSRF_COOKIE, "")
    given = form.get(CSRF_FIELD)
    expected = sign(ui_state(request).secret, nonce, _session_digest(request)) if nonce else ""
    if not same_origin(request):
        raise Forbidden("refused: this form was posted from another site")
    if not nonce or not isinstance(given, str) or not hmac.compare_digest(given, expected):
        raise Forbidden(
            "refused: the form's security token is missing or stale",
            next_steps=["reload the page and submit the form again"],
        )


def set_cookies(request: Request, response: Any) -> None:
    """Set the CSRF nonce cookie when this request had to make one."""
    nonce = getattr(request.state, "ui_new_nonce", None)
    if nonce:
        response.set_cookie(
            CSRF_COOKIE,
            nonce,
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
            path=COOKIE_PATH,
        )


def set_session(request: Request, response: Any, token: str) -> None:
    response.set_cookie(
        SESSION_COOKIE,
        token,
        max_age=SESSION_MAX_AGE_S,
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        path=COOKIE_PATH,
    )


def clear_session(response: Any) -> None:
    response.delete_cookie(SESSION_COOKIE, path=COOKIE_PATH, httponly=True, samesite="strict")
