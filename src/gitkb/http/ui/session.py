"""Who is looking at the page, and whether a form really came from it.

* Login: the API's bearer token, posted once to ``/ui/login`` and checked exactly as the API
  checks its ``Authorization`` header (``gitkb.http.auth.authenticate``). The browser then holds
  only a random session id (HTTP-only, ``SameSite=Strict``, scoped to ``/ui``, ``Secure`` when the
  request came over HTTPS -- directly or through a ``[server] trusted_proxies`` proxy); the
  session lives in the catalog (``gitkb.services.access.ui_sessions``) for 12 h, and logout deletes it.
  Each request maps the session back to its token's configuration entry (name and digest), so a
  revoked token ends its sessions. The token's name is the principal, so it is the reviewer
  recorded on approve and deny. A token bound to an agent is refused here (agents use the MCP
  server). With no token configured the page, like the API, is open to loopback only and asks
  for no login.
* CSRF: every state-changing form carries ``csrf_token`` = HMAC(secret, a random nonce kept in
  its own HTTP-only cookie + the session token's digest). A POST without the cookie, with another
  session's token, or from another site (``Origin``/``Referer``, when sent, must be a host of the
  server's allowlist -- never compared with the request's own ``Host``) is refused 403.
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

from gitkb.core.errors import Forbidden, GitkbError
from gitkb.core.hosts import host_matches
from gitkb.http.auth import Principal, authenticate
from gitkb.http.config import token_digest
from gitkb.http.hosts import is_https
from gitkb.http.limits import run_blocking
from gitkb.http.state import get_state
from gitkb.services.access import principals, ui_sessions

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
        session_id = request.cookies.get(SESSION_COOKIE, "")
        p = session_principal(request, session_id) if session_id else None
    request.state.ui_principal = p
    return p


def session_principal(request: Request, session_id: str) -> Principal | None:
    """The principal of a live session whose token is still configured (same name and digest)."""
    state = get_state(request)
    row = ui_sessions.lookup(state.workspace.ctx, session_id)
    if row is None:
        return None
    try:
        digest = bytes.fromhex(row.token_sha256)
    except ValueError:
        return None
    found = None
    for spec in state.cfg.tokens:
        if hmac.compare_digest(spec.digest, digest) and spec.name == row.token_name and not spec.agent:
            found = spec
    if found is None:
        return None
    return principals.token(found.name, found.scopes)


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
    """A browser's ``Origin`` (or, without it, ``Referer``) must name a host of the server's
    allowlist (``ServerConfig.host_allowlist``), not merely repeat the request's ``Host`` (which a
    rebound DNS name controls). The scheme is not compared: a TLS proxy in front changes it."""
    origin = request.headers.get("origin")
    if origin is None or origin == "null":
        origin = request.headers.get("referer")
        if not origin:
            return request.headers.get("origin") is None  # no header at all: not a browser's cross-site post
    netloc = urlsplit(origin).netloc.lower()
    return bool(netloc) and host_matches(netloc, get_state(request).cfg.host_allowlist)


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
            secure=is_https(request, get_state(request).cfg),
            path=COOKIE_PATH,
        )


async def open_session(request: Request, principal: Principal, token: str) -> str:
    """A server-side session for a checked token; returns its id (what the cookie holds)."""
    state = get_state(request)
    digest = token_digest(token).hex()
    return await run_blocking(
        state,
        ui_sessions.open_session,
        state.workspace.ctx,
        principal.name,
        digest,
        SESSION_MAX_AGE_S,
        write=True,
    )


def set_session(request: Request, response: Any, session_id: str) -> None:
    response.set_cookie(
        SESSION_COOKIE,
        session_id,
        max_age=SESSION_MAX_AGE_S,
        httponly=True,
        samesite="strict",
        secure=is_https(request, get_state(request).cfg),
        path=COOKIE_PATH,
    )


async def clear_session(request: Request, response: Any) -> None:
    """Log out: the session is deleted on the server, and its cookie in the browser."""
    session_id = request.cookies.get(SESSION_COOKIE, "")
    if session_id and auth_enabled(request):
        state = get_state(request)
        await run_blocking(state, ui_sessions.close_session, state.workspace.ctx, session_id, write=True)
    response.delete_cookie(
        SESSION_COOKIE,
        path=COOKIE_PATH,
        httponly=True,
        samesite="strict",
        secure=is_https(request, get_state(request).cfg),
    )
