"""Retired chunks: chunk ids that left the index, with their last document, ``source_uri`` and lines.

Rows are written by triggers (migration ``m021_retired_chunks``); this module reads them, finds the
chunk that now covers a line range of a document, and prunes them (:func:`prune`, the writer's:
rows older than the retention, and rows of chunks still live). What the prunes
removed is recorded (``writer_state``: ``retired_pruned_before``, ``retired_pruned``) so a citation
whose row is gone can say it is no longer known rather than "never indexed".
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from gitkb.stores.catalog.documents import ChunkRow, chunks_of, get_by_path
from gitkb.stores.catalog.engine import Conn
from gitkb.stores.catalog.jobs import get_state, set_state

_CHECKED = "retired_checked_upto"  # the latest retired_at the last prune looked at
_BEFORE = "retired_pruned_before"  # rows retired before this were pruned (absent: none ever was)
_PRUNED = "retired_pruned"  # rows the age prunes removed, in all
_DAYS = "retired_pruned_days"  # the retention of the prune that set _BEFORE (nodes may differ)


@dataclass(frozen=True)
class RetiredChunk:
    chunk_id: str
    index_id: str
    document_id: str
    path: str
    source_uri: str | None
    origin: str
    metadata: dict[str, Any]
    line_start: int
    line_end: int
    char_start: int
    char_end: int
    text: str
    retired_at: float


def get_retired(conn: Conn, chunk_id: str) -> RetiredChunk | None:
    """The latest retirement of ``chunk_id`` (in any index), or None."""
    r = conn.execute(
        "SELECT * FROM retired_chunks WHERE chunk_id = ? ORDER BY retired_at DESC LIMIT 1", (chunk_id,)
    ).fetchone()
    if r is None:
        return None
    try:
        meta = json.loads(r["metadata"] or "{}")
    except json.JSONDecodeError:
        meta = {}
    return RetiredChunk(
        chunk_id=r["chunk_id"],
        index_id=r["index_id"],
        document_id=r["document_id"],
        path=r["path"],
        source_uri=r["source_uri"],
        origin=r["origin"],
        metadata=meta if isinstance(meta, dict) else {},
        line_start=r["line_start"],
        line_end=r["line_end"],
        char_start=r["char_start"],
        char_end=r["char_end"],
        text=r["text"],
        retired_at=r["retired_at"],
    )


def chunk_covering(conn: Conn, index_id: str, path: str, start: int, end: int) -> ChunkRow | None:
    """The current chunk of ``path`` in the index that overlaps lines ``start``-``end`` most."""
    doc = get_by_path(conn, index_id, path)
    if doc is None:
        return None
    best, most = None, 0
    for c in chunks_of(conn, doc.rowid):
        overlap = min(c.line_end, end) - max(c.line_start, start) + 1
        if overlap > most:
            best, most = c, overlap
    return best


@dataclass(frozen=True)
class RetiredStats:
    rows: int
    pruned_before: float | None  # rows retired before this time were pruned (None: none ever was)
    pruned: int  # rows removed for their age, in all
    pruned_days: float | None = None  # the retention (days) of the prune that set pruned_before


def prune(conn: Conn, *, before: float, days: float | None = None) -> tuple[int, int]:
    """Remove the retirements older than ``before``, and those recorded since the last prune whose
    chunk is live (a document's change retires all its chunks, the unchanged ones stay: a citation of
    a live chunk is checked against it, never its retired row; one that leaves later is recorded
    again then); call inside a write transaction. Both DELETEs are indexed (``retired_chunks_at``,
    then ``chunks``' ``UNIQUE (index_id, id)``). Returns (rows removed for their age, rows of live
    chunks removed).

    A chunk id has one row at most: it names one document of one index (``core.ids.chunk_id``) and
    a later retirement replaces the row (m021's triggers), so what is kept is each id's latest."""
    since = float(get_state(conn, _CHECKED, "0") or 0)
    cur = conn.execute("DELETE FROM retired_chunks WHERE retired_at < ?", (before,))
    aged = max(int(cur.rowcount), 0)
    cur = conn.execute(
        "DELETE FROM retired_chunks WHERE retired_at >= ? AND EXISTS (SELECT 1 FROM chunks c"
        " WHERE c.index_id = retired_chunks.index_id AND c.id = retired_chunks.chunk_id)",
        (since,),
    )
    live = max(int(cur.rowcount), 0)
    latest = conn.execute("SELECT MAX(retired_at) FROM retired_chunks").fetchone()[0]
    if latest is not None and float(latest) > since:
        set_state(conn, _CHECKED, repr(float(latest)))
    if aged:
        old = get_state(conn, _BEFORE)
        if days is not None and (not old or before > float(old)):  # the writer's retention, not a reader's
            set_state(conn, _DAYS, repr(float(days)))
        set_state(conn, _BEFORE, repr(max(before, float(old)) if old else before))
        set_state(conn, _PRUNED, str(int(get_state(conn, _PRUNED, "0") or 0) + aged))
    return aged, live


def stats(conn: Conn) -> RetiredStats:
    """How many retired rows there are, and what the prunes removed."""
    rows = int(conn.execute("SELECT COUNT(*) FROM retired_chunks").fetchone()[0])
    before = get_state(conn, _BEFORE)
    days = get_state(conn, _DAYS)
    return RetiredStats(
        rows,
        float(before) if before else None,
        int(get_state(conn, _PRUNED, "0") or 0),
        float(days) if days else None,
    )
