"""Bearer tokens with scopes.

Scopes are the classes of the action table (``read``, ``propose``, ``write``,
``operate``, ``review``, ``admin``; see ``gitkb.core.action_table``); the
``write`` scope keeps its old meaning, read + write + operate. A route only
authenticates; the policy decides what the principal may call.

Tokens come from ``[[server.tokens]]`` (see ``gitkb.http.config``); they are
compared as SHA-256 digests with ``hmac.compare_digest``, against every
configured token, so timing says nothing about which (if any) matched. The
matching token's name is the principal: the actor of audited writes and the
reviewer recorded on approve/deny. A token bound to an agent (``agent = "ID"``)
acts as that agent: what the agent's binding modes allow, in its knowledge
bases only (never widened).

With no token configured the API is open, and therefore loopback only: the
server refuses to bind anywhere else (``check_bind``), and a request from a
non-loopback peer is refused even so.
"""

from __future__ import annotations

import hmac
import ipaddress

from fastapi import Request

from gitkb.core.errors import Forbidden, Unauthorized
from gitkb.http.config import ServerConfig, token_digest
from gitkb.http.state import get_state
from gitkb.services.access import principals
from gitkb.services.access.principals import Principal

__all__ = ["Principal", "authenticate", "authenticated", "check_bind", "is_loopback", "local_principal"]


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
    return principals.local()


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
    return principals.token(found.name, found.scopes, found.agent)


async def authenticated(request: Request) -> Principal:
    """A FastAPI dependency: who is calling. What the caller may do is decided by the policy
    (``gitkb.services.access.policy``) when the route calls the library, not here."""
    cfg = get_state(request).cfg
    host = request.client.host if request.client else None
    principal = authenticate(cfg, request.headers.get("authorization"), host)
    request.state.principal = principal
    return principal
