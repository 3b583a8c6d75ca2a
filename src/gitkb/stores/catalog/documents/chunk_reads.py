"""Chunk reads by cid (the derived stores' id): hits, keyword apply, verify."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from gitkb.stores.catalog.documents.rows import (
    CHUNK_COLUMNS,
    DOC_COLUMNS,
    ChunkRow,
    DocumentRow,
    chunk_from_values,
    doc_from_values,
)
from gitkb.stores.catalog.engine import Conn


def rows_in(conn: Conn, select: str, cids: Sequence[int], size: int = 900) -> Iterator[Any]:
    """The rows of ``select`` (ending in ``IN ``) for ``cids``, asked ``size`` ids at a time (SQLite
    takes at most 999 parameters), in the order the catalog returns them."""
    cids = list(cids)
    for i in range(0, len(cids), size):
        part = cids[i : i + size]
        yield from conn.execute(f"{select}({','.join('?' * len(part))})", part)


def keyword_rows(conn: Conn, cids: Sequence[int]) -> list[tuple[int, str, str | None, str | None, str, str]]:
    """(cid, index_id, tenant, document title, heading_path JSON, text) of live chunks: the keyword apply's read."""
    select = (
        "SELECT c.rowid, c.index_id, d.tenant, d.title, c.heading_path, c.text FROM chunks c"
        " JOIN documents d ON d.rowid = c.document_rowid WHERE c.rowid IN "
    )
    return [tuple(r) for r in rows_in(conn, select, cids)]


def keyword_keys(conn: Conn, cids: Sequence[int]) -> list[tuple[int, str, int, int]]:
    """(cid, index_id, document rowid, ordinal) of live chunks: ``keyword_rows`` without the text,
    heading path and document, for chunks whose text the writer still holds (``catchup.Written``)."""
    select = "SELECT rowid, index_id, document_rowid, ordinal FROM chunks WHERE rowid IN "
    return [tuple(r) for r in rows_in(conn, select, cids)]


@dataclass(frozen=True, slots=True)
class LiveChunk:
    """What a search checks of a hit before it ranks it: the chunk's index and document, and the
    document's filters (the full rows are read for the hits it cites only: ``chunks_by_cids``)."""

    cid: int
    index_id: str
    document_rowid: int
    tenant: str | None
    tier: str | None
    expires_at: float | None


def live_chunks(conn: Conn, cids: Sequence[int]) -> dict[int, LiveChunk]:
    """The live chunks among ``cids``: a narrow read (no text, no JSON) for search hits."""
    select = (
        "SELECT c.rowid, c.index_id, c.document_rowid, d.tenant, d.tier, d.expires_at FROM chunks c"
        " JOIN documents d ON d.rowid = c.document_rowid WHERE c.rowid IN "
    )
    return {
        int(r[0]): LiveChunk(int(r[0]), r[1], int(r[2]), r[3], r[4], r[5])
        for r in rows_in(conn, select, cids, 500)
    }


_FULL_ROWS = (
    "SELECT "
    + ", ".join(f"c.{c.strip()}" for c in CHUNK_COLUMNS.split(","))
    + ", "
    + ", ".join(f"d.{c.strip()}" for c in DOC_COLUMNS.split(","))
    + " FROM chunks c JOIN documents d ON d.rowid = c.document_rowid WHERE c.rowid IN "
)
_CHUNK_WIDTH = len(CHUNK_COLUMNS.split(","))


def chunks_by_cids(conn: Conn, cids: Sequence[int]) -> dict[int, tuple[ChunkRow, DocumentRow]]:
    """Live chunks with their documents, for hits and for derived-index apply (read by position)."""
    out: dict[int, tuple[ChunkRow, DocumentRow]] = {}
    for r in rows_in(conn, _FULL_ROWS, cids, 500):
        v = tuple(r)
        chunk = chunk_from_values(v[:_CHUNK_WIDTH])
        out[chunk.cid] = (chunk, doc_from_values(v[_CHUNK_WIDTH:]))
    return out


class CitedChunk(NamedTuple):
    """What a search's citation of a hit shows: the chunk, where it is, and its document's name."""

    cid: int
    id: str
    index_id: str
    text: str
    heading_path: tuple[str, ...]
    char_start: int
    char_end: int
    line_start: int
    line_end: int
    document_id: str
    path: str
    title: str | None
    source_uri: str | None


_CITED = (
    "SELECT c.rowid, c.id, c.index_id, c.text, c.heading_path, c.char_start, c.char_end, c.line_start,"
    " c.line_end, d.id, d.path, d.title, d.source_uri"
    " FROM chunks c JOIN documents d ON d.rowid = c.document_rowid WHERE c.rowid IN "
)


def cited_chunks(conn: Conn, cids: Sequence[int]) -> dict[int, CitedChunk]:
    """The live chunks among ``cids`` with what their citations show (13 columns: a third of what
    ``chunks_by_cids`` reads and builds), for the hits a search cites."""
    out: dict[int, CitedChunk] = {}
    for r in rows_in(conn, _CITED, cids, 500):
        v = tuple(r)
        path = v[4]
        heading = tuple(json.loads(path)) if path and path != "[]" else ()
        out[v[0]] = CitedChunk(v[0], v[1], v[2], v[3], heading, *v[5:])
    return out


def all_chunk_cids(conn: Conn) -> list[int]:
    return [int(r[0]) for r in conn.execute("SELECT rowid FROM chunks ORDER BY rowid")]


def chunk_cids_by_id(conn: Conn, chunk_id: str) -> list[int]:
    """The rowids of the live chunks with this chunk id."""
    return [int(r[0]) for r in conn.execute("SELECT rowid FROM chunks WHERE id = ?", (chunk_id,))]


def has_chunks(conn: Conn, index_id: str) -> bool:
    return conn.execute("SELECT 1 FROM chunks WHERE index_id = ? LIMIT 1", (index_id,)).fetchone() is not None


def chunk_count_of_index(conn: Conn, index_id: str) -> int:
    return int(conn.execute("SELECT COUNT(*) FROM chunks WHERE index_id = ?", (index_id,)).fetchone()[0])


def chunk_counts_by_index(conn: Conn, index_ids: Sequence[str]) -> dict[str, int]:
    """index id -> its chunk count (indexes without chunks are left out)."""
    return {
        str(r[0]): int(r[1])
        for r in conn.execute(
            f"SELECT index_id, COUNT(*) FROM chunks WHERE index_id IN ({','.join('?' * len(index_ids))})"
            " GROUP BY index_id",
            list(index_ids),
        ).fetchall()
    }


def chunk_index_ids(conn: Conn) -> dict[int, str]:
    """Every chunk: rowid (the derived stores' id) -> its index id (verify compares them)."""
    return {int(r[0]): str(r[1]) for r in conn.execute("SELECT rowid, index_id FROM chunks")}
