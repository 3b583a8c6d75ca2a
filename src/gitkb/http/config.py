"""The ``[server]`` section of ``gitkb.toml``, read once when the app is built.

```toml
[server]
allowed_roots = ["/srv/docs"]     # ADD_DOCUMENTS by server-side path only under these
max_body_bytes = 10485760         # every request body
webhook_max_body_bytes = 5242880  # /webhooks/* bodies
# max_top_n = 20                  # optional: lower than the action table's limits (gitkb actions --json)
# max_count = 200                 # optional: LIST_DOCUMENTS / GET_DOCUMENT page size below the table's
request_timeout_s = 30
read_threads = 32                 # concurrent blocking reads (search, list, get)
write_threads = 4                 # concurrent blocking writes (the writer serialises them)
public_host = "kb.example.com"    # the name clients (and forges' webhooks) use; always allowed
allowed_hosts = ["kb.internal:8780"]  # more Host values to answer (name, name:port, *.suffix)
trusted_proxies = ["10.0.0.5"]    # peers (IPs or CIDRs) whose X-Forwarded-Proto is believed

[[server.tokens]]
name = "ci"                       # recorded as the actor / reviewer
token_env = "GITKB_TOKEN_CI"      # or token_sha256 = "<hex>", or token = "<literal>"
scopes = ["read", "write"]        # read, propose, write, operate, review, admin
# agent = "support-bot"           # bind to an agent: only /search_index and the action API, in its KBs
```

``GITKB_WEBHOOK_SECRET`` is the webhook secret for sources that have none of
their own; ``GITKB_ALLOWED_HOSTS`` (comma-separated) adds to ``allowed_hosts``.
Tokens are kept only as SHA-256 digests.

Every request's ``Host`` must be localhost, 127.0.0.1 or [::1] (any port), ``public_host`` or
one of ``allowed_hosts`` (see ``gitkb.core.hosts`` for the forms); anything else is refused
before a route runs, so a rebound DNS name never reaches the API or the web page.
"""

from __future__ import annotations

import hashlib
import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gitkb.core.config import Settings
from gitkb.core.errors import InvalidArgument
from gitkb.core.hosts import LOOPBACK_HOSTS, split_authority

SCOPES = ("read", "propose", "write", "operate", "review", "admin")  # the action table's classes
MiB = 1024 * 1024


@dataclass(frozen=True)
class TokenSpec:
    name: str
    digest: bytes  # sha256 of the token
    scopes: frozenset[str]
    agent: str | None = None  # an agent-bound token only reaches that agent's knowledge bases


@dataclass(frozen=True)
class ServerConfig:
    tokens: tuple[TokenSpec, ...] = ()
    allowed_roots: tuple[Path, ...] = ()
    max_body_bytes: int = 10 * MiB
    webhook_max_body_bytes: int = 5 * MiB
    max_top_n: int | None = None  # None: the action table's limit, the same on every interface
    max_count: int | None = None
    request_timeout_s: float = 30.0
    read_threads: int = 32
    write_threads: int = 4
    busy_retry_after_s: int = 5
    webhook_secret: str | None = field(default=None, repr=False)
    public_host: str | None = None
    allowed_hosts: tuple[str, ...] = ()
    trusted_proxies: tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...] = ()

    @property
    def auth_enabled(self) -> bool:
        return bool(self.tokens)

    @property
    def host_allowlist(self) -> tuple[str, ...]:
        """Every ``Host`` (and web page ``Origin``) this server answers to."""
        extra = (self.public_host,) if self.public_host else ()
        return LOOPBACK_HOSTS + extra + self.allowed_hosts

    def is_trusted_proxy(self, peer: str | None) -> bool:
        if not peer or not self.trusted_proxies:
            return False
        try:
            ip = ipaddress.ip_address(peer.strip("[]"))
        except ValueError:
            return False
        return any(ip in net for net in self.trusted_proxies)


def token_digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8")).digest()


def _positive(raw: dict[str, Any], key: str, default: float, kind: type) -> Any:
    v = raw.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int | float) or v <= 0:
        raise InvalidArgument(f"[server] {key} must be a positive number, got {v!r}")
    return kind(v)


def _token(raw: Any, env: Mapping[str, str], i: int) -> TokenSpec:
    if not isinstance(raw, dict):
        raise InvalidArgument(f"[[server.tokens]] entry {i} must be a table")
    name = raw.get("name")
    if not isinstance(name, str) or not name.strip():
        raise InvalidArgument(f"[[server.tokens]] entry {i} needs a name")
    scopes = raw.get("scopes", ["read"])
    if not isinstance(scopes, list) or not scopes or any(s not in SCOPES for s in scopes):
        raise InvalidArgument(f"token {name!r}: scopes must be a non-empty list of {', '.join(SCOPES)}")
    given = [k for k in ("token", "token_env", "token_sha256") if k in raw]
    if len(given) != 1:
        raise InvalidArgument(f"token {name!r}: give exactly one of token, token_env, token_sha256")
    if "token_sha256" in raw:
        try:
            digest = bytes.fromhex(str(raw["token_sha256"]))
        except ValueError as exc:
            raise InvalidArgument(f"token {name!r}: token_sha256 is not hex") from exc
        if len(digest) != 32:
            raise InvalidArgument(f"token {name!r}: token_sha256 must be 64 hex digits")
    else:
        value = env.get(str(raw["token_env"]), "") if "token_env" in raw else str(raw["token"])
        if len(value) < 16:
            where = f"environment variable {raw['token_env']}" if "token_env" in raw else "token"
            raise InvalidArgument(f"token {name!r}: the {where} is unset or shorter than 16 characters")
        digest = token_digest(value)
    agent = raw.get("agent")
    if agent is not None and (not isinstance(agent, str) or not agent.strip()):
        raise InvalidArgument(f"token {name!r}: agent must be an agent id")
    return TokenSpec(name.strip(), digest, frozenset(scopes), agent.strip() if agent else None)


def load_server_config(settings: Settings, env: Mapping[str, str] | None = None) -> ServerConfig:
    env = os.environ if env is None else env
    raw = settings.section("server")
    tokens = tuple(_token(t, env, i) for i, t in enumerate(raw.get("tokens", []) or []))
    if len({t.name for t in tokens}) != len(tokens):
        raise InvalidArgument("[[server.tokens]] names must be unique")
    roots_raw = raw.get("allowed_roots", []) or []
    if not isinstance(roots_raw, list) or not all(isinstance(r, str) and r.strip() for r in roots_raw):
        raise InvalidArgument("[server] allowed_roots must be a list of directory paths")
    roots = tuple(Path(r).expanduser().resolve() for r in roots_raw)
    public_host = raw.get("public_host")
    if public_host is not None and (not isinstance(public_host, str) or not split_authority(public_host)):
        raise InvalidArgument(
            f"[server] public_host must be a host name (with an optional :port), got {public_host!r}"
        )
    hosts_raw = raw.get("allowed_hosts", []) or []
    env_hosts = [h.strip() for h in env.get("GITKB_ALLOWED_HOSTS", "").split(",") if h.strip()]
    if not isinstance(hosts_raw, list) or not all(isinstance(h, str) for h in hosts_raw):
        raise InvalidArgument("[server] allowed_hosts must be a list of host names")
    bad = [h for h in [*hosts_raw, *env_hosts] if not split_authority(h)]
    if bad:
        raise InvalidArgument(
            f"[server] allowed_hosts: {', '.join(map(repr, bad))} not a host name (name, name:port, *.suffix, [v6])"
        )
    proxies_raw = raw.get("trusted_proxies", []) or []
    if not isinstance(proxies_raw, list):
        raise InvalidArgument("[server] trusted_proxies must be a list of IP addresses or networks")
    try:
        proxies = tuple(ipaddress.ip_network(str(p), strict=False) for p in proxies_raw)
    except ValueError as exc:
        raise InvalidArgument(f"[server] trusted_proxies: {exc}") from None
    return ServerConfig(
        tokens=tokens,
        allowed_roots=roots,
        max_body_bytes=_positive(raw, "max_body_bytes", 10 * MiB, int),
        webhook_max_body_bytes=_positive(raw, "webhook_max_body_bytes", 5 * MiB, int),
        max_top_n=_positive(raw, "max_top_n", 1, int) if "max_top_n" in raw else None,
        max_count=_positive(raw, "max_count", 1, int) if "max_count" in raw else None,
        request_timeout_s=_positive(raw, "request_timeout_s", 30.0, float),
        read_threads=_positive(raw, "read_threads", 32, int),
        write_threads=_positive(raw, "write_threads", 4, int),
        busy_retry_after_s=_positive(raw, "busy_retry_after_s", 5, int),
        webhook_secret=env.get("GITKB_WEBHOOK_SECRET") or None,
        public_host=public_host.strip().lower() if isinstance(public_host, str) else None,
        allowed_hosts=tuple(h.strip().lower() for h in [*hosts_raw, *env_hosts]),
        trusted_proxies=proxies,
    )
