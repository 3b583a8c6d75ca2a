"""``checkout``: read-only working copies of a source for agents that read with their own file tools.

A checkout is the whole repository at the source's synced commit (never a proposal, never a
commit the index does not hold), files and folders without write bits, its git hooks refusing
commits and pushes (:mod:`gitkb.stores.checkout_tree`). Each is recorded in the catalog with the
node (host) that made it, because its files are on that node's disk:

* every sync refreshes the syncing node's checkouts of that source (:func:`refresh_source`);
* any node opening the workspace refreshes its own checkouts whose source moved since
  (:func:`refresh_moved`), so on several nodes each one follows the synced commit.

The action is ``admin``: it writes a folder the caller names on the server's disk, which no
agent or propose-class token may choose.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from pathlib import Path
from typing import Any

from gitkb.core.errors import GitkbError, InvalidArgument
from gitkb.services.changes.sources.registry import open_repo, resolve_source
from gitkb.services.context import Context
from gitkb.stores import checkout_tree
from gitkb.stores.catalog import checkouts as checkout_rows
from gitkb.stores.catalog import sources as source_rows
from gitkb.stores.catalog.sources import SourceRow

log = logging.getLogger("gitkb")
_refreshing = threading.Lock()  # one refresh of this process's checkouts at a time (threads of a server)


def node_name(ctx: Context) -> str:
    """The node a checkout belongs to: ``node`` of the settings (``GITKB_NODE``), else this host's name."""
    return ctx.settings.node or socket.gethostname()


def _directory(ctx: Context, directory: str) -> Path:
    if not isinstance(directory, str) or not os.path.isabs(directory):
        raise InvalidArgument(
            f"directory must be an absolute path on the server's disk, got {str(directory)[:200]!r}",
            next_steps=["give an absolute path (the CLI resolves a relative one against its cwd)"],
        )
    path = Path(os.path.realpath(directory))
    home = Path(os.path.realpath(ctx.settings.home))
    if path == home or home in path.parents or path in home.parents:
        raise InvalidArgument(
            f"{path} is inside (or holds) the gitkb home {home}; choose a folder outside it"
        )
    outer = checkout_tree.enclosing_checkout(path)
    if outer is not None:
        raise InvalidArgument(f"{path} is inside the checkout {outer}; choose a folder outside it")
    return path


def checkout(ctx: Context, source: Any, directory: str) -> dict[str, Any]:
    """Materialise (or refresh) a read-only copy of ``source`` at its synced commit in ``directory``."""
    row = resolve_source(ctx, source)
    if not row.synced_commit:
        raise InvalidArgument(
            f"source {row.name!r} was never synced; a checkout shows the synced commit",
            next_steps=[f"gitkb source sync {row.name}"],
        )
    path = _directory(ctx, directory)
    repo = open_repo(ctx, row)
    checkout_tree.materialise(repo.path, path, row.synced_commit, row.name, row.documents_root)
    with ctx.catalog.write() as w:
        rec = checkout_rows.upsert(
            w, source_id=row.id, node=node_name(ctx), path=str(path), commit_id=row.synced_commit
        )
    return {
        "Message": f"{path} holds {row.name} at {row.synced_commit[:12]}, read-only; it follows every sync",
        "source": row.name,
        "directory": str(path),
        "commit": row.synced_commit,
        "node": rec.node,
        "checkout_id": rec.id,
        "read_only": True,
        "next_steps": [
            "read it with your own tools; wire `gitkb guard` into the agent runtime so writes are refused",
            f"change it with propose_kb_edit({row.name!r}, ...) then open_kb_pull_request({row.name!r})",
        ],
    }


def _refresh(ctx: Context, row: SourceRow, rec: checkout_rows.CheckoutRow, commit: str) -> bool:
    path = Path(rec.path)
    if checkout_tree.read_marker(path) is None:  # removed by hand: forget it
        with ctx.catalog.write() as w:
            checkout_rows.delete(w, rec.id)
        return False
    try:
        checkout_tree.materialise(open_repo(ctx, row).path, path, commit, row.name, row.documents_root)
    except GitkbError as exc:  # one broken copy never fails a sync
        log.warning("could not refresh the checkout %s of %s: %s", path, row.name, exc)
        return False
    with ctx.catalog.write() as w:
        checkout_rows.upsert(w, source_id=row.id, node=rec.node, path=rec.path, commit_id=commit)
    return True


def refresh_source(ctx: Context, row: SourceRow, commit: str) -> list[str]:
    """After a sync of ``row`` to ``commit``: refresh this node's checkouts of it; the paths refreshed."""
    done = []
    for rec in checkout_rows.for_node(ctx.catalog.conn, node_name(ctx), row.id):
        if rec.commit_id != commit and _refresh(ctx, row, rec, commit):
            done.append(rec.path)
    return done


def refresh_moved(ctx: Context) -> list[str]:
    """This node's checkouts whose source's synced commit moved (a sync on another node): refresh them.

    One indexed query when nothing moved; a thread that finds another one refreshing goes on."""
    done: list[str] = []
    stale = checkout_rows.stale_for_node(ctx.catalog.conn, node_name(ctx))
    if not stale or not _refreshing.acquire(blocking=False):
        return done
    try:
        for rec in stale:
            row = source_rows.get_by_id(ctx.catalog.conn, rec.source_id)
            if row is not None and row.synced_commit and _refresh(ctx, row, rec, row.synced_commit):
                done.append(rec.path)
    finally:
        _refreshing.release()
    return done
