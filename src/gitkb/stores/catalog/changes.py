"""The append-only change log and the watermarks of the derived indexes.

Ops: ``add`` (chunk ``cid`` now exists with this text), ``remove`` (chunk
``cid`` is gone), ``drop_index`` (every chunk of ``index_id`` is gone). A derived
index applies entries after its watermark, idempotently by ``cid``, then
stores the new watermark.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Iterable
from dataclasses import dataclass

from gitkb.stores.catalog.engine import Conn


@dataclass(frozen=True)
class Change:
    seq: int
    op: str
    cid: int | None
    index_id: str | None
    document_rowid: int | None


def log_adds(conn: Conn, rows: Iterable[tuple[int, str, int]]) -> None:
    """rows: (cid, index_id, document_rowid)."""
    now = time.time()
    conn.executemany(
        "INSERT INTO changes(op, cid, index_id, document_rowid, at) VALUES ('add', ?, ?, ?, ?)",
        [(cid, ix, d, now) for cid, ix, d in rows],
    )


def log_adds_for_document(conn: Conn, document_rowid: int) -> None:
    conn.execute(
        "INSERT INTO changes(op, cid, index_id, document_rowid, at)"
        " SELECT 'add', rowid, index_id, document_rowid, ? FROM chunks WHERE document_rowid = ? ORDER BY rowid",
        (time.time(), document_rowid),
    )


def log_new_chunks(conn: Conn, document_rowid: int) -> list[int]:
    """``log_adds_for_document`` for a document whose chunks were all inserted in this transaction:
    the cids logged, in ordinal order (each entry's seq follows the one before, in that order)."""
    rows = conn.execute(
        "INSERT INTO changes(op, cid, index_id, document_rowid, at)"
        " SELECT 'add', rowid, index_id, document_rowid, ? FROM chunks WHERE document_rowid = ? ORDER BY ordinal"
        " RETURNING seq, cid",
        (time.time(), document_rowid),
    ).fetchall()
    return [int(cid) for _seq, cid in sorted((int(r[0]), r[1]) for r in rows)]


def log_removes_for_document(conn: Conn, document_rowid: int, cids: Iterable[int] | None = None) -> None:
    now = time.time()
    if cids is None:
        conn.execute(
            "INSERT INTO changes(op, cid, index_id, document_rowid, at)"
            " SELECT 'remove', rowid, index_id, document_rowid, ? FROM chunks WHERE document_rowid = ?",
            (now, document_rowid),
        )
    else:
        conn.executemany(
            "INSERT INTO changes(op, cid, index_id, document_rowid, at)"
            " SELECT 'remove', rowid, index_id, document_rowid, ? FROM chunks WHERE rowid = ?",
            [(now, c) for c in cids],
        )


def log_drop_index(conn: Conn, index_id: str) -> None:
    conn.execute(
        "INSERT INTO changes(op, cid, index_id, document_rowid, at) VALUES ('drop_index', NULL, ?, NULL, ?)",
        (index_id, time.time()),
    )


def head(conn: Conn) -> int:
    r = conn.execute("SELECT COALESCE(MAX(seq), 0) FROM changes").fetchone()
    return int(r[0])


def since(conn: Conn, seq: int, limit: int) -> list[Change]:
    return [
        Change(r["seq"], r["op"], r["cid"], r["index_id"], r["document_rowid"])
        for r in conn.execute(
            "SELECT seq, op, cid, index_id, document_rowid FROM changes WHERE seq > ? ORDER BY seq LIMIT ?",
            (seq, limit),
        )
    ]


def watermark(conn: Conn, name: str) -> int:
    r = conn.execute("SELECT seq FROM watermarks WHERE name = ?", (name,)).fetchone()
    return int(r[0]) if r else 0


def set_watermark(conn: Conn, name: str, seq: int) -> None:
    conn.execute(
        "INSERT INTO watermarks(name, seq) VALUES (?, ?) ON CONFLICT(name) DO UPDATE SET seq = excluded.seq",
        (name, seq),
    )


def dirty_documents(conn: Conn, name: str) -> int:
    """Documents whose latest change the derived index ``name`` has not applied yet."""
    wm = watermark(conn, name)
    r = conn.execute(
        "SELECT COUNT(DISTINCT COALESCE(document_rowid, -seq)) FROM changes WHERE seq > ?", (wm,)
    ).fetchone()
    return int(r[0])


def dirty_documents_in(conn: Conn, name: str, index_ids: Collection[str]) -> int:
    """``dirty_documents`` counted over the entries of these indexes only (none: 0)."""
    ids = sorted(set(index_ids))
    if not ids:
        return 0
    marks = ",".join("?" * len(ids))
    r = conn.execute(
        "SELECT COUNT(DISTINCT COALESCE(document_rowid, -seq)) FROM changes"
        f" WHERE seq > ? AND index_id IN ({marks})",
        (watermark(conn, name), *ids),
    ).fetchone()
    return int(r[0])


def pending(conn: Conn, name: str) -> int:
    return head(conn) - watermark(conn, name)


def touched_since(conn: Conn, seq: int) -> tuple[set[int], set[str]]:
    """What entries after ``seq`` touch: the chunk ids, and the indexes an index-wide entry
    (``drop_index``, ``reembed_index``) names. A derived index has not applied those yet: verify
    leaves them out of its comparison."""
    cids: set[int] = set()
    whole: set[str] = set()
    for cid, op, index_id in conn.execute("SELECT cid, op, index_id FROM changes WHERE seq > ?", (seq,)):
        if cid is not None:
            cids.add(int(cid))
        elif op != "add" and op != "remove" and index_id:
            whole.add(str(index_id))
    return cids, whole


def watermarks(conn: Conn) -> dict[str, int]:
    """Every stored watermark: name -> seq."""
    return {str(r[0]): int(r[1]) for r in conn.execute("SELECT name, seq FROM watermarks ORDER BY name")}
