"""What verify says about an index a RECHUNK is rebuilding, and what repair does about it.

RECHUNK switches the keyword index to the rebuilt chunks (``rechunk.after_keywords``) before it
swaps the catalog rows, so while it runs the keyword index may hold either generation of the
index: verify leaves that index's keyword entries out of its comparison and lists it under
``rebuilding`` (``running``). A rebuild whose process died before the swap (``interrupted``:
its lock in this home is free) is a difference, ``rechunk_interrupted``: repair drops the
temporary index and gives the keyword index the index's own chunks back
(``rebuild_guard.recover_stale``, what the next write to it would do). Only the writer can tell
the two apart (a RECHUNK runs as a job, under its write lock, holding the lock in its home);
anywhere else a rebuild is reported as ``running``.
"""

from __future__ import annotations

from typing import Any

from gitkb.services.context import Context
from gitkb.services.derived import rebuild_guard
from gitkb.services.operations.verify_report import Difference
from gitkb.stores.catalog import indexes as index_rows
from gitkb.stores.catalog import vector_state as vs


def rebuilds(ctx: Context) -> dict[str, vs.Rebuild]:
    """The catalog's RECHUNK rebuilds: index id -> its rebuild row."""
    conn = ctx.catalog.conn
    out = {}
    for row in index_rows.list_all(conn, include_hidden=True):
        rb = vs.get_rebuild(conn, row.id)
        if rb is not None:
            out[row.id] = rb
    return out


def interrupted(ctx: Context, found: dict[str, vs.Rebuild]) -> set[str]:
    """The rebuilds whose process died before the swap (asked on the writer only, while no job
    runs: a RECHUNK runs as one and holds its lock for as long as it runs)."""
    if not found or not ctx.is_writer or not ctx.write_lock.acquire(blocking=False):
        return set()
    try:
        out = set()
        for ix in found:
            fh = rebuild_guard._try_lock(rebuild_guard._lock_path(ctx, ix))
            if fh is not None:  # free: nobody is rebuilding it
                rebuild_guard._release(fh)
                out.add(ix)
        return out
    finally:
        ctx.write_lock.release()


def report(
    ctx: Context, found: dict[str, vs.Rebuild], dead: set[str]
) -> tuple[list[dict[str, Any]], list[Difference]]:
    """``rebuilding`` (index_name, temporary_index, state) and the ``rechunk_interrupted`` difference."""
    names = {r.id: r.name for r in index_rows.list_all(ctx.catalog.conn, include_hidden=True)}
    listed = [
        {
            "index_name": names.get(ix, ix),
            "temporary_index": rb.temp_index_name,
            "state": "interrupted" if ix in dead else "running",
        }
        for ix, rb in sorted(found.items(), key=lambda kv: names.get(kv[0], kv[0]))
    ]
    if not dead:
        return listed, []
    diff = Difference(
        "rechunk_interrupted",
        "keywords",
        len(dead),
        "a RECHUNK died before its swap (the index is intact): its temporary index is left, and the "
        "keyword index may hold the rebuilt chunks in the index's place",
        sorted(names.get(ix, ix) for ix in dead),
        items=sorted(dead),
    )
    return listed, [diff]


def note(listed: list[dict[str, Any]]) -> str:
    """The sentence the Message ends with while some index is being re-chunked ('' when none)."""
    running = [r["index_name"] for r in listed if r["state"] == "running"]
    if not running:
        return ""
    return (
        f"; not compared with the keyword index: {', '.join(repr(n) for n in running)} "
        "(a RECHUNK is rebuilding it; verify again when it has finished)"
    )


def repair(ctx: Context, by_kind: dict[str, list[Difference]]) -> list[str]:
    """Clean up the interrupted rebuilds (on the writer, under its write lock)."""
    done = []
    for d in by_kind.get("rechunk_interrupted", []):
        for ix in d.items:
            row = index_rows.get_by_id(ctx.catalog.conn, ix)
            if rebuild_guard.recover_stale(ctx, ix) is None:
                done.append(
                    f"dropped the temporary index of the interrupted RECHUNK of {row.name if row else ix!r};"
                    " the keyword index holds the index's own chunks again"
                )
    return done
