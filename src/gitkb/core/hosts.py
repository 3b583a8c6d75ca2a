"""Host names as gitkb compares them: a ``Host`` header against the server's allowlist, a remote
URL's host against the hosts a credential is bound to.

An allowlist entry is ``name`` (any port), ``name:port``, ``*.suffix`` (any name under the
suffix, not the suffix itself) or an IPv6 literal in brackets (``[::1]``, ``[::1]:8780``).
Names compare lowercased, with one trailing dot removed; anything that is not a plain
``host[:port]`` (user-info, a path, percent escapes, spaces) matches nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import urlsplit

LOOPBACK_HOSTS: tuple[str, ...] = ("localhost", "127.0.0.1", "[::1]")
_NAME = re.compile(r"^(?:\*\.)?[a-z0-9_]([a-z0-9_.-]*[a-z0-9_])?$")
_V6 = re.compile(r"^\[[0-9a-f:.]+\]$")
_SCP_LIKE = re.compile(r"^(?:[^@/:]+@)?(?P<host>[^/:\[\]]+|\[[^\]]+\]):(?!//)")


def split_authority(value: str) -> tuple[str, int | None] | None:
    """``host[:port]`` → (normalised host, port), or None when it is not that shape."""
    if not isinstance(value, str):
        return None
    text = value.strip().lower()
    if not text or len(text) > 300:
        return None
    port: int | None = None
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            return None
        host, rest = text[: end + 1], text[end + 1 :]
        if not _V6.match(host):
            return None
        if rest:
            if not rest.startswith(":") or not rest[1:].isdigit():
                return None
            port = int(rest[1:])
    else:
        host, sep, rest = text.partition(":")
        if sep:
            if not rest.isdigit():
                return None
            port = int(rest)
        if host.endswith("."):
            host = host[:-1]
        if not _NAME.match(host) or ".." in host:
            return None
    if port is not None and not 0 < port < 65536:
        return None
    return host, port


def host_matches(authority: str, allowed: Iterable[str]) -> bool:
    """Whether ``authority`` (``host[:port]``) is one of ``allowed`` (see the module docstring)."""
    got = split_authority(authority)
    if got is None:
        return False
    host, port = got
    for entry in allowed:
        want = split_authority(entry)
        if want is None:
            continue
        w_host, w_port = want
        if w_port is not None and w_port != port:
            continue
        if w_host.startswith("*."):
            if host.endswith(w_host[1:]) and host != w_host[2:]:
                return True
        elif w_host == host:
            return True
    return False


def url_authority(url: str) -> str | None:
    """The ``host[:port]`` a git remote URL talks to (user-info dropped), or None for a local path,
    ``file://`` URL or anything else that reaches no host."""
    if not isinstance(url, str):
        return None
    text = url.strip()
    if "://" in text:
        parts = urlsplit(text)
        if parts.scheme.lower() == "file":
            return None
        netloc = parts.netloc.rpartition("@")[2]
        return netloc.lower() or None
    m = _SCP_LIKE.match(text)
    if m and "/" not in text.split(":", 1)[0]:  # git's scp-like ssh syntax: [user@]host:path
        return m.group("host").lower()
    return None


def is_local_url(url: str) -> bool:
    """A local path or a ``file://`` URL (git reads the server's own filesystem)."""
    if not isinstance(url, str):
        return False
    text = url.strip()
    if "::" in text.split("/", 1)[0]:  # a remote helper (``transport::address``): not local
        return False
    if "://" in text:
        return urlsplit(text).scheme.lower() == "file"
    return url_authority(text) is None
