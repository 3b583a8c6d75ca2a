"""A sync held to this server's allowed roots: a source that follows a path of this disk.

A source's url may be a local path or ``file://`` (added from the CLI or the library, where the
operator's rights hold; over HTTP only inside ``[server] allowed_roots``). A sync (or a rollback)
fetches from it: a remote caller's (the HTTP API, a webhook) is held to the allowed roots --
refused (``forbidden``, ``details.refused_roots`` by source, as a held reindex) before anything is
fetched, when it is asked for, queued and when it runs (``gitkb.core.disk_roots``). A source with
a network url (https, ssh, git) is never refused here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gitkb.core import disk_roots
from gitkb.services.changes.sources.registry import resolve_source
from gitkb.services.context import Context
from gitkb.stores.catalog.sources import SourceRow


def refuse_outside(ctx: Context, source: Any, held_to: tuple[Path, ...] | None) -> SourceRow:
    """The source ``source`` names; with ``held_to`` refused when its url reads this server's disk
    outside those roots (symlinks resolved; a relative path or no root allowed: refused)."""
    row = resolve_source(ctx, source)
    if held_to is None:
        return row
    path = disk_roots.local_path(row.url)
    if path is None or disk_roots.inside(path, held_to):
        return row
    steps = [
        f"sync from the server's CLI (gitkb source sync {row.name}): it holds the operator's rights",
        "or add the repository's folder to [server] allowed_roots in gitkb.toml",
        "or follow the repository by a network url (https://, ssh://)",
    ]
    raise disk_roots.refusal(
        "sync", {row.name: [path]}, held_to, by="source", steps=steps, nothing="nothing was fetched"
    )
