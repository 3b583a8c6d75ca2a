"""The one write path that keeps chunk ids stable: upsert, chunk replacement, delete, rename,
RECHUNK's swap."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from gitkb.core import ids
from gitkb.core.models import ChunkSpan
from gitkb.stores.catalog import changes
from gitkb.stores.catalog.documents.rows import DocumentRow, NewDocument, get_by_path
from gitkb.stores.catalog.engine import Conn, dialect_of

# SQLite page cache of the connection writing a big ingest, in KiB (SQLite's default is 2 MiB). Its
# chunk rows go into two indexes keyed by hashes, so a 2 MiB cache writes and reads back the same
# index pages again and again: at 64 MiB the awsdocs ingest's writes take 0.08-0.14 s less CPU.
BULK_CACHE_KIB = 64 * 1024


@contextmanager
def bulk_cache(conn: Conn) -> Iterator[None]:
    """A ``BULK_CACHE_KIB`` page cache on this SQLite connection while a big ingest writes, its own
    size again after (the pages past it are freed). PostgreSQL: nothing."""
    if dialect_of(conn).name != "sqlite":
        yield
        return
    before = int(conn.execute("PRAGMA cache_size").fetchone()[0])
    conn.execute(f"PRAGMA cache_size=-{BULK_CACHE_KIB}")
    try:
        yield
    finally:
        conn.execute(f"PRAGMA cache_size={before}")


def upsert(conn: Conn, doc: NewDocument) -> tuple[str, DocumentRow]:
    """Write one document and its chunks; returns ("added"|"modified", row).

    Chunks whose id survives (same document id, same text, same occurrence)
    keep their row, so derived indexes don't redo them; only removed chunks
    are logged as ``remove`` and new ones as ``add``.
    """
    status, _rowid, _cids = write_document(conn, doc)
    row = get_by_path(conn, doc.index_id, doc.path)
    assert row is not None
    return status, row


def write_document(conn: Conn, doc: NewDocument) -> tuple[str, int, list[int] | None]:
    """``upsert`` without reading the row back: ("added" or "modified", the document's rowid, and for
    a new document the cids of its chunks in ordinal order, the only change-log entries its write
    made; None for a modified one) (ADD_DOCUMENTS' batches)."""
    now = time.time()
    existing = get_by_path(conn, doc.index_id, doc.path)
    meta = json.dumps(doc.metadata or {}, ensure_ascii=False, sort_keys=True)
    if existing is None:
        doc_id = doc.document_id or ids.new_document_id()
        rowid = _insert_document(conn, doc, doc_id, meta, now)
        status = "added"
    else:
        doc_id = existing.id
        rowid = existing.rowid
        _update_document(conn, doc, rowid, meta, now)
        status = "modified"
    if existing is None:
        return status, rowid, _insert_new_chunks(conn, doc.index_id, rowid, doc_id, doc.chunks)
    replace_chunks(conn, doc.index_id, rowid, doc_id, doc.chunks)
    if existing.tenant != doc.tenant:
        # derived indexes filter by tenant: every kept chunk must be applied again
        changes.log_adds_for_document(conn, rowid)
    return status, rowid, None


def _row_values(doc: NewDocument, meta: str) -> tuple[Any, ...]:
    """The columns an insert and an update both write, in the order both name them."""
    cfg = doc.chunk_config
    return (
        doc.title,
        doc.kind,
        doc.origin,
        doc.origin_path,
        doc.source_uri,
        doc.content_hash,
        doc.size,
        doc.mtime,
        doc.text,
        meta,
        cfg.strategy,
        cfg.size,
        cfg.overlap,
        doc.tenant,
        doc.tier,
        doc.expires_at,
    )


def _insert_document(conn: Conn, doc: NewDocument, doc_id: str, meta: str, now: float) -> int:
    """A new document row; returns its rowid."""
    cur = conn.execute(
        "INSERT INTO documents(id, index_id, path, title, kind, origin, origin_path, source_uri, content_hash,"
        " size, mtime, text, metadata, chunk_strategy, chunk_size, chunk_overlap, tenant, tier, expires_at,"
        " created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) RETURNING rowid",
        (doc_id, doc.index_id, doc.path, *_row_values(doc, meta), now, now),
    )
    return int(cur.fetchall()[0][0])


def _update_document(conn: Conn, doc: NewDocument, rowid: int, meta: str, now: float) -> None:
    conn.execute(
        "UPDATE documents SET title=?, kind=?, origin=?, origin_path=?, source_uri=?, content_hash=?, size=?,"
        " mtime=?, text=?, metadata=?, chunk_strategy=?, chunk_size=?, chunk_overlap=?, tenant=?, tier=?,"
        " expires_at=?, updated_at=? WHERE rowid=?",
        (*_row_values(doc, meta), now, rowid),
    )


def _heading_json(spans: Sequence[ChunkSpan]) -> list[str]:
    """Each span's heading path as JSON, each distinct path dumped once (a document's chunks share few)."""
    done: dict[tuple[str, ...], str] = {}
    out: list[str] = []
    for span in spans:
        path = tuple(span.heading_path)
        heading = done.get(path)
        if heading is None:
            heading = done[path] = json.dumps(list(path), ensure_ascii=False)
        out.append(heading)
    return out


_INSERT_CHUNK = (
    "INSERT INTO chunks(id, document_rowid, index_id, ordinal, text, content_hash, char_start, char_end,"
    " line_start, line_end, heading_path, token_count) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)"
)


def _chunk_values(
    index_id: str, document_rowid: int, ordinal: int, span: ChunkSpan, cid: str, h: str, heading: str
) -> tuple[Any, ...]:
    """The twelve columns of one new chunk row, in ``_INSERT_CHUNK``'s order."""
    return (
        cid,
        document_rowid,
        index_id,
        ordinal,
        span.text,
        h,
        span.char_start,
        span.char_end,
        span.line_start,
        span.line_end,
        heading,
        span.token_count,
    )


def _insert_new_chunks(
    conn: Conn, index_id: str, document_rowid: int, document_id: str, spans: Sequence[ChunkSpan]
) -> list[int]:
    """A new document's chunks, bulk inserted, then each logged as an add in one statement; returns
    their cids in ordinal order."""
    hashes = [ids.content_hash(s.text) for s in spans]
    new_ids = ids.chunk_ids_for(document_id, hashes)
    rows = zip(spans, new_ids, hashes, _heading_json(spans), strict=True)
    conn.executemany(
        _INSERT_CHUNK,
        [
            _chunk_values(index_id, document_rowid, o, span, cid, h, hd)
            for o, (span, cid, h, hd) in enumerate(rows)
        ],
    )
    return changes.log_new_chunks(conn, document_rowid) if spans else []


def replace_chunks(
    conn: Conn,
    index_id: str,
    document_rowid: int,
    document_id: str,
    spans: Sequence[ChunkSpan],
    *,
    fresh: bool = False,
) -> tuple[int, int]:
    """Make the document's chunks exactly ``spans``; returns (added, removed). ``fresh``: the document
    row was inserted in this transaction, so it has no chunks to look up yet."""
    old = (
        {}
        if fresh
        else {
            r["id"]: (r["rowid"], r["heading_path"])
            for r in conn.execute(
                "SELECT rowid, id, heading_path FROM chunks WHERE document_rowid = ?", (document_rowid,)
            )
        }
    )
    if not old:  # a new document (or one without chunks): bulk insert, then log every chunk at once
        return len(_insert_new_chunks(conn, index_id, document_rowid, document_id, spans)), 0
    hashes = [ids.content_hash(s.text) for s in spans]
    new_ids = ids.chunk_ids_for(document_id, hashes)
    rows = list(enumerate(zip(spans, new_ids, hashes, _heading_json(spans), strict=True)))
    keep = set(new_ids) & set(old)
    gone = [old[i][0] for i in old if i not in keep]
    if gone:
        changes.log_removes_for_document(conn, document_rowid, gone)
        conn.executemany("DELETE FROM chunks WHERE rowid = ?", [(g,) for g in gone])
    added_rows: list[tuple[int, str, int]] = []
    for ordinal, (span, cid, h, heading) in rows:
        if cid in keep:
            rowid, old_heading = old[cid]
            conn.execute(
                "UPDATE chunks SET ordinal=?, char_start=?, char_end=?, line_start=?, line_end=?, heading_path=?"
                " WHERE rowid=?",
                (ordinal, span.char_start, span.char_end, span.line_start, span.line_end, heading, rowid),
            )
            if heading != old_heading:
                added_rows.append((rowid, index_id, document_rowid))
            continue
        cur = conn.execute(
            _INSERT_CHUNK + " RETURNING rowid",
            _chunk_values(index_id, document_rowid, ordinal, span, cid, h, heading),
        )
        added_rows.append((int(cur.fetchall()[0][0]), index_id, document_rowid))
    if added_rows:
        changes.log_adds(conn, added_rows)
    return len(added_rows), len(gone)


def delete(conn: Conn, document_rowid: int) -> None:
    changes.log_removes_for_document(conn, document_rowid)
    conn.execute("DELETE FROM documents WHERE rowid = ?", (document_rowid,))


def rename(conn: Conn, document_rowid: int, new_path: str, title: str | None = None) -> None:
    if title is None:
        conn.execute(
            "UPDATE documents SET path = ?, updated_at = ? WHERE rowid = ?",
            (new_path, time.time(), document_rowid),
        )
    else:
        conn.execute(
            "UPDATE documents SET path = ?, title = ?, updated_at = ? WHERE rowid = ?",
            (new_path, title, time.time(), document_rowid),
        )


def swap_index(conn: Conn, index_id: str, temp_index_id: str) -> list[tuple[int, str, int]]:
    """RECHUNK's swap, inside the caller's write transaction: the index's documents go, those of
    ``temp_index_id`` take their place (keeping each document id's ``created_at``), and every chunk
    now in the index is logged as an add. Returns the old chunks as (cid, index_id, document_rowid),
    for the caller to log as removes after the adds."""
    old = [
        (int(r[0]), index_id, int(r[1]))
        for r in conn.execute(
            "SELECT rowid, document_rowid FROM chunks WHERE index_id = ? ORDER BY rowid", (index_id,)
        )
    ]
    created = {
        r[0]: r[1]
        for r in conn.execute("SELECT id, created_at FROM documents WHERE index_id = ?", (index_id,))
    }
    conn.execute(
        "DELETE FROM documents WHERE index_id = ?", (index_id,)
    )  # chunks cascade; the caller logs them
    conn.execute("UPDATE documents SET index_id = ? WHERE index_id = ?", (index_id, temp_index_id))
    conn.execute("UPDATE chunks SET index_id = ? WHERE index_id = ?", (index_id, temp_index_id))
    conn.executemany(
        "UPDATE documents SET created_at = ? WHERE index_id = ? AND id = ?",
        [(at, index_id, doc_id) for doc_id, at in created.items()],
    )
    conn.execute(
        "INSERT INTO changes(op, cid, index_id, document_rowid, at)"
        " SELECT 'add', rowid, index_id, document_rowid, ? FROM chunks WHERE index_id = ? ORDER BY rowid",
        (time.time(), index_id),
    )
    return old


def set_mtime(conn: Conn, index_id: str, path: str, mtime: float) -> None:
    """An unchanged file was touched: remember its new mtime (reindex trusts it next time)."""
    conn.execute("UPDATE documents SET mtime=? WHERE index_id=? AND path=?", (mtime, index_id, path))
