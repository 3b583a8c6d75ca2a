"""LIST_DOCUMENTS and GET_DOCUMENT's reads: filtered pages of documents and their chunks."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from gitkb.stores.catalog.documents.rows import (
    CHUNK_COLUMNS,
    DOC_COLUMNS,
    ChunkRow,
    DocumentRow,
    chunk_from_row,
    doc_from_row,
)
from gitkb.stores.catalog.engine import Conn, Dialect, dialect_of


def count(
    conn: Conn,
    index_id: str,
    *,
    path_filter: str | None = None,
    rowids: set[int] | None = None,
    live_at: float | None = None,
) -> int:
    where, args = _filters(dialect_of(conn), index_id, path_filter, rowids, live_at)
    return int(conn.execute(f"SELECT COUNT(*) FROM documents WHERE {where}", args).fetchone()[0])


def page(
    conn: Conn,
    index_id: str,
    *,
    start: int,
    count: int,
    path_filter: str | None = None,
    rowids: set[int] | None = None,
    live_at: float | None = None,
) -> list[DocumentRow]:
    where, args = _filters(dialect_of(conn), index_id, path_filter, rowids, live_at)
    rows = conn.execute(
        f"SELECT {DOC_COLUMNS} FROM documents WHERE {where} ORDER BY path LIMIT ? OFFSET ?",
        (*args, count, start),
    )
    return [doc_from_row(r) for r in rows]


def _filters(
    dialect: Dialect,
    index_id: str,
    path_filter: str | None,
    rowids: set[int] | None,
    live_at: float | None = None,
) -> tuple[str, tuple[Any, ...]]:
    """``path_filter``: a glob (``*?[``) over the whole path, else a substring of it.
    ``rowids``: only these documents (the content filter's answer)."""
    where = ["index_id = ?"]
    args: list[Any] = [index_id]
    if live_at is not None:  # documents past their TTL are invisible
        where.append("(expires_at IS NULL OR expires_at > ?)")
        args.append(live_at)
    if path_filter:
        if any(ch in path_filter for ch in "*?["):
            where.append(dialect.glob.format(col="path"))
            args.append(dialect.glob_param(path_filter))
        else:
            where.append(dialect.strpos.format(a="path", b="?") + " > 0")
            args.append(path_filter)
    if rowids is not None:
        where.append(f"rowid IN ({dialect.json_ints})")
        args.append(json.dumps(sorted(rowids)))
    return " AND ".join(where), tuple(args)


def document_rowids_of_chunks(conn: Conn, cids: set[int]) -> set[int]:
    """The documents these chunks belong to."""
    if not cids:
        return set()
    return {
        int(r[0])
        for r in conn.execute(
            f"SELECT DISTINCT document_rowid FROM chunks WHERE rowid IN ({dialect_of(conn).json_ints})",
            (json.dumps(sorted(cids)),),
        )
    }


def chunk_outline(conn: Conn, document_rowids: Sequence[int], limit: int) -> dict[int, list[ChunkRow]]:
    """The first ``limit`` chunks of each document (LIST_DOCUMENTS' chunk details)."""
    out: dict[int, list[ChunkRow]] = {d: [] for d in document_rowids}
    if not document_rowids:
        return out
    for r in conn.execute(
        f"SELECT {CHUNK_COLUMNS} FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY document_rowid ORDER BY ordinal) AS n"
        f" FROM chunks WHERE document_rowid IN ({dialect_of(conn).json_ints})) AS t WHERE n <= ?"
        " ORDER BY document_rowid, ordinal",
        (json.dumps(list(document_rowids)), limit),
    ):
        out[int(r["document_rowid"])].append(chunk_from_row(r))
    return out


def chunk_counts(conn: Conn, document_rowids: Sequence[int]) -> dict[int, int]:
    if not document_rowids:
        return {}
    return {
        int(r[0]): int(r[1])
        for r in conn.execute(
            "SELECT document_rowid, COUNT(*) FROM chunks"
            f" WHERE document_rowid IN ({dialect_of(conn).json_ints})"
            " GROUP BY document_rowid",
            (json.dumps(list(document_rowids)),),
        )
    }


def chunks_of(conn: Conn, document_rowid: int, *, start: int = 0, count: int | None = None) -> list[ChunkRow]:
    sql = f"SELECT {CHUNK_COLUMNS} FROM chunks WHERE document_rowid = ? ORDER BY ordinal"
    args: tuple[Any, ...] = (document_rowid,)
    if count is not None:
        sql += " LIMIT ? OFFSET ?"
        args = (document_rowid, count, start)
    return [chunk_from_row(r) for r in conn.execute(sql, args)]


def chunk_count_of(conn: Conn, document_rowid: int) -> int:
    return int(
        conn.execute("SELECT COUNT(*) FROM chunks WHERE document_rowid = ?", (document_rowid,)).fetchone()[0]
    )


def with_text(conn: Conn, rowids: Sequence[int]) -> list[tuple[DocumentRow, str]]:
    """These documents and their full stored text (a batch: at most a few hundred rowids)."""
    marks = ",".join("?" * len(rowids))
    return [
        (doc_from_row(r), str(r["text"]))
        for r in conn.execute(
            f"SELECT {DOC_COLUMNS}, text FROM documents WHERE rowid IN ({marks})", list(rowids)
        )
    ]


def file_documents(conn: Conn, index_id: str) -> list[tuple[int, str, str | None]]:
    """(rowid, path, origin_path) of the index's documents that came from files."""
    return [
        (r["rowid"], r["path"], r["origin_path"])
        for r in conn.execute(
            "SELECT rowid, path, origin_path FROM documents WHERE index_id=? AND origin='file'", (index_id,)
        )
    ]


def rowids_of_index(conn: Conn, index_id: str) -> list[int]:
    return [
        int(r[0])
        for r in conn.execute("SELECT rowid FROM documents WHERE index_id = ? ORDER BY rowid", (index_id,))
    ]
