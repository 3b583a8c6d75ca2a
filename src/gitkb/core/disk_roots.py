"""Where a remote caller's work may read this server's disk: inside ``[server] allowed_roots``.

An interface others can reach (the HTTP API and its web page, ``gitkb mcp --transport http``,
the webhooks) holds what it asks for to the allowed roots; the CLI, the library and ``gitkb mcp``
over stdio hold the operator's rights and are not held. A job such a caller queues carries the
roots it is held to in its parameters (``HELD_TO``, persisted with the job, so a restart keeps
them), and the job checks the disk it would read against them when it runs, before reading.

* ``inside``: a path, symlinks resolved, is one of the roots or under one.
* ``local_path``: the path on this disk a git url reads (a local path or ``file://``), else None.
* ``refusal``: the one ``forbidden`` answer for what lies outside: ``details.refused_roots``
  (the paths by index or source) and ``details.allowed_roots``; none set: reading the disk by
  path is disabled.

Pure but for ``os.path.realpath``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from gitkb.core.errors import Forbidden
from gitkb.core.hosts import is_local_url

HELD_TO = "held_to"  # the job parameter: the allowed roots (strings) the job is held to; absent: not held


def held_roots(params: dict[str, Any]) -> tuple[Path, ...] | None:
    """The roots a job's ``params`` hold it to (None: not held: the operator's own job)."""
    raw = params.get(HELD_TO)
    if raw is None:
        return None
    return tuple(Path(str(r)) for r in raw) if isinstance(raw, list) else ()  # not a list: no root at all


def inside(path: str | Path, roots: Iterable[Path]) -> bool:
    """``path`` (absolute; symlinks resolved) is one of ``roots`` or under one. Relative: never."""
    p = Path(path).expanduser()
    if not p.is_absolute():
        return False
    real = Path(os.path.realpath(p))
    return any(real == root or root in real.parents for root in roots)


def local_path(url: str) -> str | None:
    """The path of this server's disk a git ``url`` reads (a local path, ``file://``), or None
    for a url that reaches a host (https, ssh, git, scp-like)."""
    if not is_local_url(url):
        return None
    text = url.strip()
    if "://" in text:
        return unquote(urlsplit(text).path)
    return text


def refusal(
    what: str,
    refused: dict[str, list[str]],
    roots: Sequence[Path],
    *,
    by: str,
    steps: list[str],
    nothing: str = "nothing was read",
) -> Forbidden:
    """``forbidden``: ``what`` (``reindex``, ``sync``) would read ``refused`` (paths by ``by``
    name: index, source) outside ``roots``."""
    n = sum(len(paths) for paths in refused.values())
    why = (
        " outside [server] allowed_roots"
        if roots
        else "; reading it by path is disabled on this server (no [server] allowed_roots)"
    )
    names = ", ".join(repr(name) for name in sorted(refused))
    return Forbidden(
        f"{what} would read {n} root(s) of this server's disk{why} ({by} {names}); {nothing}",
        details={"refused_roots": refused, "allowed_roots": [str(r) for r in roots]},
        next_steps=steps,
    )
