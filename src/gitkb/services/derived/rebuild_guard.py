"""The rebuild guard: while RECHUNK rebuilds an index, writes to it are refused (``conflict``).

RECHUNK holds ``<home>/locks/rebuild-<index id>.lock`` for as long as it runs and records the
rebuild (its temporary index) in the catalog; a rebuild whose lock is free was left by a process that
died, and is cleaned up here (the original index is untouched). Every ingest path asks
``ensure_not_rebuilding``; the action API asks ``guard_action`` before it queues a write.
"""

from __future__ import annotations

import fcntl
from pathlib import Path
from typing import IO, Any

from gitkb.core.action_table import DOCUMENT_INDEX
from gitkb.core.errors import Conflict
from gitkb.services.context import Context
from gitkb.services.derived.catchup import catch_up_keywords, switch_keywords
from gitkb.stores.catalog import changes
from gitkb.stores.catalog import indexes as index_rows
from gitkb.stores.catalog import vector_state as vs
from gitkb.stores.catalog.indexes import IndexRow

# Actions (of the action table) that change the index named by ``index_name``: refused while it is rebuilt.
WRITE_ACTIONS = frozenset(a.name for a in DOCUMENT_INDEX if not a.is_read and a.target == "index_name")


def _lock_path(ctx: Context, index_id: str) -> Path:
    return ctx.settings.home / "locks" / f"rebuild-{index_id}.lock"


def _try_lock(path: Path) -> IO[str] | None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fh = open(path, "a+", encoding="utf-8")  # noqa: SIM115 - held until the rebuild ends
    try:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        fh.close()
        return None
    return fh


def _release(fh: IO[str] | None) -> None:
    if fh is not None:
        fcntl.flock(fh.fileno(), fcntl.LOCK_UN)
        fh.close()


def _drop_temp(ctx: Context, rb: vs.Rebuild) -> None:
    """Remove the temporary index and the marker (the original index is untouched).

    The keyword index may already hold the rebuilt chunks in the original's place (a failure or a
    crash after ``switch_keywords``): it gets the original's chunks back, in one commit."""
    temp_cids = vs.chunk_cids_of_index(ctx.catalog.conn, rb.temp_index_id)
    with ctx.catalog.write() as w:
        if index_rows.get_by_id(w, rb.temp_index_id) is not None:
            changes.log_drop_index(w, rb.temp_index_id)
            index_rows.delete(w, rb.temp_index_id)
        vs.clear_rebuild(w, rb.index_id)
    if temp_cids:
        switch_keywords(ctx, rb.index_id, temp_cids, vs.chunk_cids_of_index(ctx.catalog.conn, rb.index_id))
    catch_up_keywords(ctx)


def recover_stale(ctx: Context, index_id: str) -> vs.Rebuild | None:
    """The live rebuild of ``index_id``, or None; a stale one (its process died) is cleaned up first."""
    rb = vs.get_rebuild(ctx.catalog.conn, index_id)
    if rb is None:
        return None
    fh = _try_lock(_lock_path(ctx, index_id))
    if fh is None:
        return rb  # someone holds the lock: the rebuild is running
    try:
        _drop_temp(ctx, rb)
    finally:
        _release(fh)
    return None


def ensure_not_rebuilding(ctx: Context, row: IndexRow) -> None:
    """Conflict while ``row`` is being rebuilt by RECHUNK."""
    rb = recover_stale(ctx, row.id)
    if rb is not None:
        raise Conflict(
            f"index {row.name!r} is being rebuilt by RECHUNK (temporary index {rb.temp_index_name!r}); "
            "writes to it are refused until the rebuild finishes",
            next_steps=["retry when RECHUNK has finished (it returns when the index is searchable again)"],
            details={"index_name": row.name, "temporary_index": rb.temp_index_name},
        )


def guard_action(ctx: Context, action: str, params: dict[str, Any]) -> None:
    """For the action API: refuse a write action aimed at an index being rebuilt."""
    if action.upper() not in WRITE_ACTIONS:
        return
    name = params.get("index_name")
    if not isinstance(name, str) or not name:
        return
    row = index_rows.get_by_name(ctx.catalog.conn, name.strip())
    if row is not None and not row.hidden:
        ensure_not_rebuilding(ctx, row)
