"""Bearer tokens with scopes.

Scopes: ``read`` (search, list, get, status), ``write`` (ingest, delete, sync,
propose, open pull requests), ``review`` (approve and deny reviews), ``admin``
(everything). ``write`` and ``review`` include ``read``.

Tokens come from ``[[server.tokens]]`` (see ``gitkb.http.config``); they are
compared as SHA-256 digests with ``hmac.compare_digest``, against every
configured token, so timing says nothing about which (if any) matched. The
matching token's name is the principal: the actor of audited writes and the
reviewer recorded on approve/deny. A token bound to an agent (``agent = "ID"``)
reaches only ``/search_index`` and the action API, both scoped to that agent's
knowledge bases (never widened).

With no token configured the API is open, and therefore loopback only: the
server refuses to bind anywhere else (``check_bind``), and a request from a
non-loopback peer is refused even so.
"""

from __future__ import annotations

import getpass
import hmac
import ipaddress
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from fastapi import Request

from gitkb.core.errors import Forbidden, Unauthorized
from gitkb.http.config import SCOPES, ServerConfig, token_digest

AGENT_ROUTES = frozenset({"/search_index", "/actions/document_index"})
IMPLIED: dict[str, frozenset[str]] = {
    "read": frozenset({"read"}),
    "write": frozenset({"read", "write"}),
    "review": frozenset({"read", "review"}),
    "admin": frozenset(SCOPES),
}


@dataclass(frozen=True)
class Principal:
    name: str
    scopes: frozenset[str]
    authenticated: bool
    agent: str | None = None

    def has(self, scope: str) -> bool:
        return scope in self.scopes


def effective_scopes(granted: frozenset[str]) -> frozenset[str]:
    out: set[str] = set()
    for s in granted:
        out |= IMPLIED.get(s, frozenset())
    return frozenset(out)


def is_loopback(host: str | None) -> bool:
    if host is None:
        return True  # a Unix socket: only local processes can reach it
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, cfg: ServerConfig) -> None:
    """Refuse a non-loopback bind address when no token is configured."""
    if not cfg.auth_enabled and not is_loopback(host):
        raise Forbidden(
            f"refusing to listen on {host}: no API token is configured, so the API would be open",
            next_steps=[
                "add a [[server.tokens]] entry (name, token_env, scopes) to gitkb.toml",
                "or listen on 127.0.0.1 only",
            ],
        )


def local_principal() -> Principal:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # pragma: no cover - no passwd entry
        user = "local"
    return Principal(f"local:{user}", frozenset(SCOPES), authenticated=False)


def authenticate(cfg: ServerConfig, authorization: str | None, client_host: str | None) -> Principal:
    if not cfg.auth_enabled:
        if not is_loopback(client_host):
            raise Unauthorized(f"this server has no API tokens and only answers loopback, not {client_host}")
        return local_principal()
    if not authorization:
        raise Unauthorized(
            "missing bearer token",
            next_steps=["send 'Authorization: Bearer <token>' with a configured token"],
        )
    scheme, _, value = authorization.partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        raise Unauthorized("the Authorization header must be 'Bearer <token>'")
    presented = token_digest(value.strip())
    found = None
    for spec in cfg.tokens:  # no early exit: the time taken does not depend on which matched
        if hmac.compare_digest(presented, spec.digest) and found is None:
            found = spec
    if found is None:
        raise Unauthorized("unknown or revoked token")
    return Principal(found.name, effective_scopes(found.scopes), authenticated=True, agent=found.agent)


def require(scope: str) -> Callable[[Request], Awaitable[Principal]]:
    """A FastAPI dependency: the caller's principal, which must hold ``scope``."""
    if scope not in SCOPES:  # pragma: no cover - a typo in a route
        raise ValueError(scope)

    async def dependency(request: Request) -> Principal:
        from gitkb.http.state import get_state

        cfg = get_state(request).cfg
        host = request.client.host if request.client else None
        principal = authenticate(cfg, request.headers.get("authorization"), host)
        if not principal.has(scope):
            raise Forbidden(
                f"token {principal.name!r} lacks the {scope!r} scope",
                details={"required_scope": scope, "token_scopes": sorted(principal.scopes)},
            )
        if principal.agent:
            route = getattr(request.scope.get("route"), "path", request.url.path)
            if route not in AGENT_ROUTES:
                raise Forbidden(
                    f"token {principal.name!r} is bound to agent {principal.agent!r}; it may only use "
                    + ", ".join(sorted(AGENT_ROUTES)),
                    next_steps=["agents use the MCP server (gitkb mcp) for everything else"],
                )
        request.state.principal = principal
        return principal

    dependency.__name__ = f"require_{scope}"
    return dependency
