"""Document and chunk rows, and the one write path that keeps chunk ids stable."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gitkb.core import ids
from gitkb.core.models import ChunkConfig, ChunkSpan
from gitkb.stores.catalog import changes


@dataclass(frozen=True)
class DocumentRow:
    rowid: int
    id: str
    index_id: str
    path: str
    title: str | None
    kind: str
    origin: str
    origin_path: str | None
    source_uri: str | None
    content_hash: str
    size: int
    mtime: float | None
    metadata: dict[str, Any]
    chunk_config: ChunkConfig | None
    tenant: str | None
    tier: str | None
    expires_at: float | None
    created_at: float
    updated_at: float


DOC_COLUMNS = (
    "rowid, id, index_id, path, title, kind, origin, origin_path, source_uri, content_hash, size, mtime,"
    " metadata, chunk_strategy, chunk_size, chunk_overlap, tenant, tier, expires_at, created_at, updated_at"
)


def doc_from_row(r: sqlite3.Row) -> DocumentRow:
    cfg = None
    if r["chunk_strategy"] is not None:
        cfg = ChunkConfig(r["chunk_strategy"], r["chunk_size"], r["chunk_overlap"])
    return DocumentRow(
        rowid=r["rowid"],
        id=r["id"],
        index_id=r["index_id"],
        path=r["path"],
        title=r["title"],
        kind=r["kind"],
        origin=r["origin"],
        origin_path=r["origin_path"],
        source_uri=r["source_uri"],
        content_hash=r["content_hash"],
        size=r["size"],
        mtime=r["mtime"],
        metadata=json.loads(r["metadata"] or "{}"),
        chunk_config=cfg,
        tenant=r["tenant"],
        tier=r["tier"],
        expires_at=r["expires_at"],
        created_at=r["created_at"],
        updated_at=r["updated_at"],
    )


@dataclass(frozen=True)
class NewDocument:
    """Everything the write path needs for one document."""

    index_id: str
    path: str
    text: str
    content_hash: str
    size: int
    kind: str
    origin: str  # "file" | "text" | "git"
    chunks: Sequence[ChunkSpan]
    chunk_config: ChunkConfig
    title: str | None = None
    origin_path: str | None = None
    source_uri: str | None = None
    mtime: float | None = None
    metadata: dict[str, Any] | None = None
    tenant: str | None = None
    tier: str | None = None
    expires_at: float | None = None
    document_id: str | None = None  # force an id (sync renames, rechunk copies)


def get_by_path(conn: sqlite3.Connection, index_id: str, path: str) -> DocumentRow | None:
    r = conn.execute(
        f"SELECT {DOC_COLUMNS} FROM documents WHERE index_id = ? AND path = ?", (index_id, path)
    ).fetchone()
    return doc_from_row(r) if r else None


def get_by_id(conn: sqlite3.Connection, index_id: str, document_id: str) -> DocumentRow | None:
    r = conn.execute(
        f"SELECT {DOC_COLUMNS} FROM documents WHERE index_id = ? AND id = ?", (index_id, document_id)
    ).fetchone()
    return doc_from_row(r) if r else None


def get_text(conn: sqlite3.Connection, rowid: int) -> str:
    r = conn.execute("SELECT text FROM documents WHERE rowid = ?", (rowid,)).fetchone()
    return str(r[0]) if r else ""


def hashes_by_path(
    conn: sqlite3.Connection, index_id: str
) -> dict[str, tuple[str, int, float | None, str | None]]:
    """path -> (content_hash, size, mtime, state key) for cheap unchanged checks (see ``state_key``)."""
    out: dict[str, tuple[str, int, float | None, str | None]] = {}
    for r in conn.execute(
        "SELECT path, content_hash, size, mtime, chunk_strategy, chunk_size, chunk_overlap, tenant, tier, expires_at"
        " FROM documents WHERE index_id = ?",
        (index_id,),
    ):
        cfg = ChunkConfig(r["chunk_strategy"], r["chunk_size"], r["chunk_overlap"])
        key = state_key(cfg, r["tenant"], r["tier"], r["expires_at"])
        out[r["path"]] = (r["content_hash"], r["size"], r["mtime"], key)
    return out


def config_key(cfg: ChunkConfig) -> str:
    return f"{cfg.strategy}/{cfg.size}/{cfg.overlap}"


def state_key(cfg: ChunkConfig, tenant: str | None, tier: str | None, expires_at: float | None) -> str:
    """What besides the text decides whether re-adding a file is a no-op: chunking and placement.

    A document with an expiry never matches, so re-adding it always sets its TTL anew."""
    return f"{config_key(cfg)}|{tenant or ''}|{tier or ''}|{'ttl' if expires_at is not None else ''}"


def upsert(conn: sqlite3.Connection, doc: NewDocument) -> tuple[str, DocumentRow]:
    """Write one document and its chunks; returns ("added"|"modified", row).

    Chunks whose id survives (same document id, same text, same occurrence)
    keep their row, so derived indexes don't redo them; only removed chunks
    are logged as ``remove`` and new ones as ``add``.
    """
    now = time.time()
    existing = get_by_path(conn, doc.index_id, doc.path)
    meta = json.dumps(doc.metadata or {}, ensure_ascii=False, sort_keys=True)
    cfg = doc.chunk_config
    if existing is None:
        doc_id = doc.document_id or ids.new_document_id()
        cur = conn.execute(
            "INSERT INTO documents(id, index_id, path, title, kind, origin, origin_path, source_uri, content_hash,"
            " size, mtime, text, metadata, chunk_strategy, chunk_size, chunk_overlap, tenant, tier, expires_at,"
            " created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                doc_id,
                doc.index_id,
                doc.path,
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
                now,
                now,
            ),
        )
        rowid = int(cur.lastrowid or 0)
        status = "added"
    else:
        doc_id = existing.id
        rowid = existing.rowid
        conn.execute(
            "UPDATE documents SET title=?, kind=?, origin=?, origin_path=?, source_uri=?, content_hash=?, size=?,"
            " mtime=?, text=?, metadata=?, chunk_strategy=?, chunk_size=?, chunk_overlap=?, tenant=?, tier=?,"
            " expires_at=?, updated_at=? WHERE rowid=?",
            (
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
                now,
                rowid,
            ),
        )
        status = "modified"
    replace_chunks(conn, doc.index_id, rowid, doc_id, doc.chunks)
    if existing is not None and existing.tenant != doc.tenant:
        # derived indexes filter by tenant: every kept chunk must be applied again
        changes.log_adds_for_document(conn, rowid)
    row = get_by_path(conn, doc.index_id, doc.path)
    assert row is not None
    return status, row


def replace_chunks(
    conn: sqlite3.Connection, index_id: str, document_rowid: int, document_id: str, spans: Sequence[ChunkSpan]
) -> tuple[int, int]:
    """Make the document's chunks exactly ``spans``; returns (added, removed)."""
    hashes = [ids.content_hash(s.text) for s in spans]
    new_ids = ids.chunk_ids_for(document_id, hashes)
    old = {
        r["id"]: (r["rowid"], r["heading_path"])
        for r in conn.execute(
            "SELECT rowid, id, heading_path FROM chunks WHERE document_rowid = ?", (document_rowid,)
        )
    }
    if not old:  # a new document: bulk insert, then log every chunk in one statement
        conn.executemany(
            "INSERT INTO chunks(id, document_rowid, index_id, ordinal, text, content_hash, char_start, char_end,"
            " line_start, line_end, heading_path, token_count) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            [
                (
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
                    json.dumps(list(span.heading_path), ensure_ascii=False),
                    span.token_count,
                )
                for ordinal, (span, cid, h) in enumerate(zip(spans, new_ids, hashes, strict=True))
            ],
        )
        changes.log_adds_for_document(conn, document_rowid)
        return len(spans), 0
    keep = set(new_ids) & set(old)
    gone = [old[i][0] for i in old if i not in keep]
    if gone:
        changes.log_removes_for_document(conn, document_rowid, gone)
        conn.executemany("DELETE FROM chunks WHERE rowid = ?", [(g,) for g in gone])
    added_rows: list[tuple[int, str, int]] = []
    for ordinal, (span, cid, h) in enumerate(zip(spans, new_ids, hashes, strict=True)):
        heading = json.dumps(list(span.heading_path), ensure_ascii=False)
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
            "INSERT INTO chunks(id, document_rowid, index_id, ordinal, text, content_hash, char_start, char_end,"
            " line_start, line_end, heading_path, token_count) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            (
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
            ),
        )
        added_rows.append((int(cur.lastrowid or 0), index_id, document_rowid))
    if added_rows:
        changes.log_adds(conn, added_rows)
    return len(added_rows), len(gone)


def delete(conn: sqlite3.Connection, document_rowid: int) -> None:
    changes.log_removes_for_document(conn, document_rowid)
    conn.execute("DELETE FROM documents WHERE rowid = ?", (document_rowid,))


def rename(conn: sqlite3.Connection, document_rowid: int, new_path: str, title: str | None = None) -> None:
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


# -- what a user deleted or renamed through gitkb (reindex keeps it) ------------------------------


def set_override(conn: sqlite3.Connection, index_id: str, origin_path: str, new_path: str | None) -> None:
    """The file ``origin_path`` stays out of the index (``new_path`` None) or is stored as ``new_path``."""
    conn.execute(
        "INSERT INTO document_overrides(index_id, origin_path, new_path, at) VALUES (?,?,?,?)"
        " ON CONFLICT(index_id, origin_path) DO UPDATE SET new_path=excluded.new_path, at=excluded.at",
        (index_id, origin_path, new_path, time.time()),
    )


def overrides(conn: sqlite3.Connection, index_id: str) -> dict[str, str | None]:
    """origin_path -> the stored path it was renamed to, or None when it was deleted."""
    return {
        r[0]: r[1]
        for r in conn.execute(
            "SELECT origin_path, new_path FROM document_overrides WHERE index_id = ?", (index_id,)
        )
    }


def clear_overrides(conn: sqlite3.Connection, index_id: str, origin_paths: Sequence[str]) -> None:
    """ADD_DOCUMENTS named these files again: they follow the disk once more."""
    conn.executemany(
        "DELETE FROM document_overrides WHERE index_id = ? AND origin_path = ?",
        [(index_id, p) for p in origin_paths],
    )


def count(
    conn: sqlite3.Connection,
    index_id: str,
    *,
    path_filter: str | None = None,
    rowids: set[int] | None = None,
    live_at: float | None = None,
) -> int:
    where, args = _filters(index_id, path_filter, rowids, live_at)
    return int(conn.execute(f"SELECT COUNT(*) FROM documents WHERE {where}", args).fetchone()[0])


def page(
    conn: sqlite3.Connection,
    index_id: str,
    *,
    start: int,
    count: int,
    path_filter: str | None = None,
    rowids: set[int] | None = None,
    live_at: float | None = None,
) -> list[DocumentRow]:
    where, args = _filters(index_id, path_filter, rowids, live_at)
    rows = conn.execute(
        f"SELECT {DOC_COLUMNS} FROM documents WHERE {where} ORDER BY path LIMIT ? OFFSET ?",
        (*args, count, start),
    )
    return [doc_from_row(r) for r in rows]


def _filters(
    index_id: str, path_filter: str | None, rowids: set[int] | None, live_at: float | None = None
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
            where.append("path GLOB ?")
            args.append(path_filter)
        else:
            where.append("instr(path, ?) > 0")
            args.append(path_filter)
    if rowids is not None:
        where.append("rowid IN (SELECT value FROM json_each(?))")
        args.append(json.dumps(sorted(rowids)))
    return " AND ".join(where), tuple(args)


def document_rowids_of_chunks(conn: sqlite3.Connection, cids: set[int]) -> set[int]:
    """The documents these chunks belong to."""
    if not cids:
        return set()
    return {
        int(r[0])
        for r in conn.execute(
            "SELECT DISTINCT document_rowid FROM chunks WHERE rowid IN (SELECT value FROM json_each(?))",
            (json.dumps(sorted(cids)),),
        )
    }


def chunk_outline(
    conn: sqlite3.Connection, document_rowids: Sequence[int], limit: int
) -> dict[int, list[ChunkRow]]:
    """The first ``limit`` chunks of each document (LIST_DOCUMENTS' chunk details)."""
    out: dict[int, list[ChunkRow]] = {d: [] for d in document_rowids}
    if not document_rowids:
        return out
    for r in conn.execute(
        f"SELECT {CHUNK_COLUMNS} FROM (SELECT *, ROW_NUMBER() OVER (PARTITION BY document_rowid ORDER BY ordinal) AS n"
        " FROM chunks WHERE document_rowid IN (SELECT value FROM json_each(?))) WHERE n <= ? ORDER BY document_rowid, ordinal",
        (json.dumps(list(document_rowids)), limit),
    ):
        out[int(r["document_rowid"])].append(chunk_from_row(r))
    return out


def chunk_counts(conn: sqlite3.Connection, document_rowids: Sequence[int]) -> dict[int, int]:
    if not document_rowids:
        return {}
    return {
        int(r[0]): int(r[1])
        for r in conn.execute(
            "SELECT document_rowid, COUNT(*) FROM chunks WHERE document_rowid IN (SELECT value FROM json_each(?))"
            " GROUP BY document_rowid",
            (json.dumps(list(document_rowids)),),
        )
    }


@dataclass(frozen=True)
class ChunkRow:
    cid: int
    id: str
    index_id: str
    document_rowid: int
    ordinal: int
    text: str
    content_hash: str
    char_start: int
    char_end: int
    line_start: int
    line_end: int
    heading_path: tuple[str, ...]
    token_count: int


CHUNK_COLUMNS = (
    "rowid, id, index_id, document_rowid, ordinal, text, content_hash, char_start, char_end, line_start, line_end,"
    " heading_path, token_count"
)


def chunk_from_row(r: sqlite3.Row) -> ChunkRow:
    return ChunkRow(
        cid=r["rowid"],
        id=r["id"],
        index_id=r["index_id"],
        document_rowid=r["document_rowid"],
        ordinal=r["ordinal"],
        text=r["text"],
        content_hash=r["content_hash"],
        char_start=r["char_start"],
        char_end=r["char_end"],
        line_start=r["line_start"],
        line_end=r["line_end"],
        heading_path=tuple(json.loads(r["heading_path"] or "[]")),
        token_count=r["token_count"],
    )


def chunks_of(
    conn: sqlite3.Connection, document_rowid: int, *, start: int = 0, count: int | None = None
) -> list[ChunkRow]:
    sql = f"SELECT {CHUNK_COLUMNS} FROM chunks WHERE document_rowid = ? ORDER BY ordinal"
    args: tuple[Any, ...] = (document_rowid,)
    if count is not None:
        sql += " LIMIT ? OFFSET ?"
        args = (document_rowid, count, start)
    return [chunk_from_row(r) for r in conn.execute(sql, args)]


def chunk_count_of(conn: sqlite3.Connection, document_rowid: int) -> int:
    return int(
        conn.execute("SELECT COUNT(*) FROM chunks WHERE document_rowid = ?", (document_rowid,)).fetchone()[0]
    )


def keyword_rows(
    conn: sqlite3.Connection, cids: Sequence[int]
) -> list[tuple[int, str, str | None, str | None, str, str]]:
    """(cid, index_id, tenant, document title, heading_path JSON, text) of live chunks: the keyword apply's read."""
    out = []
    cids = list(cids)
    for i in range(0, len(cids), 900):
        part = cids[i : i + 900]
        marks = ",".join("?" * len(part))
        out.extend(
            conn.execute(
                "SELECT c.rowid, c.index_id, d.tenant, d.title, c.heading_path, c.text FROM chunks c"
                f" JOIN documents d ON d.rowid = c.document_rowid WHERE c.rowid IN ({marks})",
                part,
            ).fetchall()
        )
    return [tuple(r) for r in out]


def chunks_by_cids(conn: sqlite3.Connection, cids: Sequence[int]) -> dict[int, tuple[ChunkRow, DocumentRow]]:
    """Live chunks with their documents, for hits and for derived-index apply."""
    out: dict[int, tuple[ChunkRow, DocumentRow]] = {}
    cids = list(cids)
    for i in range(0, len(cids), 500):
        part = cids[i : i + 500]
        marks = ",".join("?" * len(part))
        cols = ", ".join(f"c.{c.strip()} AS c_{c.strip()}" for c in CHUNK_COLUMNS.split(","))
        dcols = ", ".join(f"d.{c.strip()} AS {c.strip()}" for c in DOC_COLUMNS.split(","))
        for r in conn.execute(
            f"SELECT {cols}, {dcols} FROM chunks c JOIN documents d ON d.rowid = c.document_rowid"
            f" WHERE c.rowid IN ({marks})",
            part,
        ):
            chunk = ChunkRow(
                cid=r["c_rowid"],
                id=r["c_id"],
                index_id=r["c_index_id"],
                document_rowid=r["c_document_rowid"],
                ordinal=r["c_ordinal"],
                text=r["c_text"],
                content_hash=r["c_content_hash"],
                char_start=r["c_char_start"],
                char_end=r["c_char_end"],
                line_start=r["c_line_start"],
                line_end=r["c_line_end"],
                heading_path=tuple(json.loads(r["c_heading_path"] or "[]")),
                token_count=r["c_token_count"],
            )
            out[chunk.cid] = (chunk, doc_from_row(r))
    return out


# -- counts and reads the services ask for ----------------------------------------------------------

LIVE = "(expires_at IS NULL OR expires_at > ?)"  # unexpired documents; its one argument is now


def count_all(conn: sqlite3.Connection) -> int:
    return int(conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0])


def count_in(conn: sqlite3.Connection, index_ids: Sequence[str]) -> int:
    """Documents in these indexes (0 for none)."""
    if not index_ids:
        return 0
    marks = ",".join("?" * len(index_ids))
    return int(
        conn.execute(
            f"SELECT COUNT(*) FROM documents WHERE index_id IN ({marks})", list(index_ids)
        ).fetchone()[0]
    )


def count_expired(conn: sqlite3.Connection, now: float, index_id: str | None = None) -> int:
    """Documents past their TTL at ``now`` (all indexes, or one)."""
    sql = "SELECT COUNT(*) FROM documents WHERE expires_at IS NOT NULL AND expires_at <= ?"
    args: list[Any] = [now]
    if index_id is not None:
        sql += " AND index_id = ?"
        args.append(index_id)
    return int(conn.execute(sql, args).fetchone()[0])


def expired_batch(conn: sqlite3.Connection, now: float, limit: int) -> list[tuple[int, str, str]]:
    """(rowid, index id, index name) of the first ``limit`` documents past their TTL at ``now``."""
    return [
        (int(r[0]), str(r[1]), str(r[2]))
        for r in conn.execute(
            "SELECT d.rowid, d.index_id, i.name FROM documents d JOIN indexes i ON i.id = d.index_id"
            " WHERE d.expires_at IS NOT NULL AND d.expires_at <= ? ORDER BY d.rowid LIMIT ?",
            (now, limit),
        ).fetchall()
    ]


def has_live_tenant(conn: sqlite3.Connection, index_id: str, tenant: str | None, now: float) -> bool:
    """The index holds a live document of ``tenant`` (None: an untenanted one); answered from the
    (index_id, tenant, expires_at) index."""
    return bool(
        conn.execute(
            f"SELECT EXISTS(SELECT 1 FROM documents WHERE index_id = ? AND tenant IS ? AND {LIVE})",
            (index_id, tenant, now),
        ).fetchone()[0]
    )


def tenant_counts(conn: sqlite3.Connection, index_id: str, tenant: str, now: float) -> tuple[int, int, int]:
    """Live documents of the index: (of ``tenant``, of other tenants, untenanted)."""
    r = conn.execute(
        "SELECT SUM(tenant = ?), SUM(tenant IS NOT NULL AND tenant != ?), SUM(tenant IS NULL)"
        f" FROM documents WHERE index_id = ? AND {LIVE}",
        (tenant, tenant, index_id, now),
    ).fetchone()
    mine, others, untenanted = (int(x or 0) for x in r)
    return mine, others, untenanted


def untenanted_counts(conn: sqlite3.Connection, index_id: str, now: float) -> tuple[int, int]:
    """Live documents of the index: (untenanted, tenanted)."""
    r = conn.execute(
        f"SELECT SUM(tenant IS NULL), SUM(tenant IS NOT NULL) FROM documents WHERE index_id = ? AND {LIVE}",
        (index_id, now),
    ).fetchone()
    untenanted, tenanted = (int(x or 0) for x in r)
    return untenanted, tenanted


def set_mtime(conn: sqlite3.Connection, index_id: str, path: str, mtime: float) -> None:
    """An unchanged file was touched: remember its new mtime (reindex trusts it next time)."""
    conn.execute("UPDATE documents SET mtime=? WHERE index_id=? AND path=?", (mtime, index_id, path))


def file_documents(conn: sqlite3.Connection, index_id: str) -> list[tuple[int, str, str | None]]:
    """(rowid, path, origin_path) of the index's documents that came from files."""
    return [
        (r["rowid"], r["path"], r["origin_path"])
        for r in conn.execute(
            "SELECT rowid, path, origin_path FROM documents WHERE index_id=? AND origin='file'", (index_id,)
        )
    ]


def rowids_of_index(conn: sqlite3.Connection, index_id: str) -> list[int]:
    return [
        int(r[0])
        for r in conn.execute("SELECT rowid FROM documents WHERE index_id = ? ORDER BY rowid", (index_id,))
    ]


def with_text(conn: sqlite3.Connection, rowids: Sequence[int]) -> list[tuple[DocumentRow, str]]:
    """These documents and their full stored text (a batch: at most a few hundred rowids)."""
    marks = ",".join("?" * len(rowids))
    return [
        (doc_from_row(r), str(r["text"]))
        for r in conn.execute(
            f"SELECT {DOC_COLUMNS}, text FROM documents WHERE rowid IN ({marks})", list(rowids)
        )
    ]


def swap_index(conn: sqlite3.Connection, index_id: str, temp_index_id: str) -> list[tuple[int, str, int]]:
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


def all_chunk_cids(conn: sqlite3.Connection) -> list[int]:
    return [int(r[0]) for r in conn.execute("SELECT rowid FROM chunks ORDER BY rowid")]


def chunk_cids_by_id(conn: sqlite3.Connection, chunk_id: str) -> list[int]:
    """The rowids of the live chunks with this chunk id."""
    return [int(r[0]) for r in conn.execute("SELECT rowid FROM chunks WHERE id = ?", (chunk_id,))]


def has_chunks(conn: sqlite3.Connection, index_id: str) -> bool:
    return conn.execute("SELECT 1 FROM chunks WHERE index_id = ? LIMIT 1", (index_id,)).fetchone() is not None


def chunk_count_of_index(conn: sqlite3.Connection, index_id: str) -> int:
    return int(conn.execute("SELECT COUNT(*) FROM chunks WHERE index_id = ?", (index_id,)).fetchone()[0])


def chunk_counts_by_index(conn: sqlite3.Connection, index_ids: Sequence[str]) -> dict[str, int]:
    """index id -> its chunk count (indexes without chunks are left out)."""
    return {
        str(r[0]): int(r[1])
        for r in conn.execute(
            f"SELECT index_id, COUNT(*) FROM chunks WHERE index_id IN ({','.join('?' * len(index_ids))})"
            " GROUP BY index_id",
            list(index_ids),
        ).fetchall()
    }


def chunk_index_ids(conn: sqlite3.Connection) -> dict[int, str]:
    """Every chunk: rowid (the derived stores' id) -> its index id (verify compares them)."""
    return {int(r[0]): str(r[1]) for r in conn.execute("SELECT rowid, index_id FROM chunks")}
