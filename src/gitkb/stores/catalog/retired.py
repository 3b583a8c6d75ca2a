"""Retired chunks: chunk ids that left the index, with their last document, ``source_uri`` and lines.

Rows are written by triggers (migration ``m021_retired_chunks``); this module only reads them, and
finds the chunk that now covers a line range of a document.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from gitkb.stores.catalog.documents import ChunkRow, chunks_of, get_by_path
from gitkb.stores.catalog.engine import Conn


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
