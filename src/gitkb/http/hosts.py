"""The ``Host`` allowlist and what a request's scheme really is.

* ``HostGate`` (ASGI middleware, outermost) refuses, with 403 ``forbidden`` and before any
  route or body is read, a request whose ``Host`` is not in ``ServerConfig.host_allowlist``
  (localhost, 127.0.0.1, [::1] with any port; ``[server] public_host``; ``allowed_hosts``; and
  the IP address the connection itself reached, which no DNS name can stand for).
  A page on a DNS name rebound to 127.0.0.1 sends its own name as ``Host``, so it never reaches
  the API, the web page or the webhooks (Django's ``ALLOWED_HOSTS``, jupyter_server's
  ``local_hostnames``).
* ``is_https`` says whether the browser spoke HTTPS: the request's own scheme, or
  ``X-Forwarded-Proto: https`` from a peer listed in ``[server] trusted_proxies`` (the header
  is ignored from anyone else).
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from fastapi import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from gitkb.core.hosts import host_matches, split_authority
from gitkb.http.config import ServerConfig
from gitkb.http.errors import error_response


class HostGate:
    def __init__(self, app: ASGIApp, cfg: ServerConfig) -> None:
        self.app = app
        self.cfg = cfg

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        hosts = [v for k, v in scope.get("headers", []) if k.lower() == b"host"]
        host = hosts[0].decode("latin-1") if len(hosts) == 1 else ""
        if host and (host_matches(host, self.cfg.host_allowlist) or _own_address(host, scope)):
            await self.app(scope, receive, send)
            return
        shown = host[:100] if host else ("several" if hosts else "none")
        response = error_response(
            "forbidden",
            f"refused: this server does not answer to Host {shown!r}",
            status=403,
            next_steps=[
                "use the server's configured name, or localhost",
                "the admin may add the name to [server] allowed_hosts (or public_host) in gitkb.toml",
            ],
            headers={"Connection": "close"},
        )
        if scope["type"] == "websocket":  # pragma: no cover - no websocket routes today
            await send({"type": "websocket.close", "code": 1008})
            return
        await response(scope, receive, send)


class OriginGate:
    """For a programmatic API a browser has no business calling (the MCP transport): a request
    that carries ``Origin`` -- only browsers send it -- must come from a page of an allowed host
    (``Origin: null``, a file or sandboxed page, never does); one without it passes. The MCP
    specification asks servers to validate ``Origin`` against DNS rebinding and cross-site pages."""

    def __init__(self, app: ASGIApp, cfg: ServerConfig) -> None:
        self.app = app
        self.cfg = cfg

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        origins = [v for k, v in scope.get("headers", []) if k.lower() == b"origin"]
        if scope["type"] != "http" or not origins:
            await self.app(scope, receive, send)
            return
        origin = origins[0].decode("latin-1") if len(origins) == 1 else ""
        parts = urlsplit(origin.strip())
        netloc = parts.netloc if parts.scheme.lower() in ("http", "https") and not parts.path else ""
        if netloc and (host_matches(netloc, self.cfg.host_allowlist) or _own_address(netloc, scope)):
            await self.app(scope, receive, send)
            return
        response = error_response(
            "forbidden",
            f"refused: requests from the web page {origin[:100]!r} are not answered here",
            status=403,
            next_steps=[
                "call the MCP endpoint from an MCP client (it sends no Origin), or from an allowed host's page"
            ],
            headers={"Connection": "close"},
        )
        await response(scope, receive, send)


def _own_address(host: str, scope: Scope) -> bool:
    """``Host`` is the IP address this connection reached (``gitkb serve --host 10.0.0.5``): an IP
    literal cannot be rebound, and a page served from it is this server's own origin."""
    server = scope.get("server")
    got = split_authority(host)
    if not server or got is None:
        return False
    try:
        ip = ipaddress.ip_address(got[0].strip("[]"))
        return ip == ipaddress.ip_address(str(server[0]))
    except ValueError:
        return False


def is_https(request: Request, cfg: ServerConfig) -> bool:
    if request.url.scheme == "https":
        return True
    peer = request.client.host if request.client else None
    if not cfg.is_trusted_proxy(peer):
        return False
    proto = request.headers.get("x-forwarded-proto", "")
    # A proxy chain appends; the nearest (trusted) proxy's value is the last one.
    return proto.split(",")[-1].strip().lower() == "https"
