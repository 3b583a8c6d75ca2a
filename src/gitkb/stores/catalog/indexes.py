"""Index rows."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from gitkb.core.models import ChunkConfig
from gitkb.stores.catalog.engine import Conn


@dataclass(frozen=True)
class IndexRow:
    id: str
    name: str
    created_at: float
    updated_at: float
    chunk_strategy: str | None
    chunk_size: int | None
    chunk_overlap: int | None
    embeddings: bool
    embedding_identity: str | None
    settings: dict[str, Any] = field(default_factory=dict)
    hidden: bool = False

    @property
    def chunk_defaults(self) -> ChunkConfig | None:
        if self.chunk_strategy is None and self.chunk_size is None and self.chunk_overlap is None:
            return None
        return ChunkConfig(self.chunk_strategy or "sentence", self.chunk_size, self.chunk_overlap)

    def chunk_config_dict(self) -> dict[str, Any]:
        return {
            "chunk_size": self.chunk_size,
            "chunk_overlap": self.chunk_overlap,
            "chunk_strategy": self.chunk_strategy,
        }


def _row(r: Any) -> IndexRow:
    return IndexRow(
        id=r["id"],
        name=r["name"],
        created_at=r["created_at"],
        updated_at=r["updated_at"],
        chunk_strategy=r["chunk_strategy"],
        chunk_size=r["chunk_size"],
        chunk_overlap=r["chunk_overlap"],
        embeddings=bool(r["embeddings"]),
        embedding_identity=r["embedding_identity"],
        settings=json.loads(r["settings"] or "{}"),
        hidden=bool(r["hidden"]),
    )


def get_by_name(conn: Conn, name: str) -> IndexRow | None:
    r = conn.execute("SELECT * FROM indexes WHERE name = ?", (name,)).fetchone()
    return _row(r) if r else None


def get_by_id(conn: Conn, index_id: str) -> IndexRow | None:
    r = conn.execute("SELECT * FROM indexes WHERE id = ?", (index_id,)).fetchone()
    return _row(r) if r else None


def list_all(conn: Conn, *, include_hidden: bool = False) -> list[IndexRow]:
    sql = "SELECT * FROM indexes" + ("" if include_hidden else " WHERE hidden = 0") + " ORDER BY name"
    return [_row(r) for r in conn.execute(sql)]


def insert(
    conn: Conn,
    *,
    index_id: str,
    name: str,
    chunk: ChunkConfig | None,
    embeddings: bool,
    embedding_identity: str | None,
    settings: dict[str, Any] | None = None,
    hidden: bool = False,
) -> IndexRow:
    now = time.time()
    conn.execute(
        "INSERT INTO indexes(id, name, created_at, updated_at, chunk_strategy, chunk_size, chunk_overlap,"
        " embeddings, embedding_identity, settings, hidden) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
        (
            index_id,
            name,
            now,
            now,
            chunk.strategy if chunk else None,
            chunk.size if chunk else None,
            chunk.overlap if chunk else None,
            int(embeddings),
            embedding_identity,
            json.dumps(settings or {}),
            int(hidden),
        ),
    )
    row = get_by_id(conn, index_id)
    assert row is not None
    return row


def rename(conn: Conn, index_id: str, new_name: str) -> None:
    conn.execute(
        "UPDATE indexes SET name = ?, updated_at = ? WHERE id = ?", (new_name, time.time(), index_id)
    )


def set_chunk_defaults(conn: Conn, index_id: str, chunk: ChunkConfig) -> None:
    conn.execute(
        "UPDATE indexes SET chunk_strategy = ?, chunk_size = ?, chunk_overlap = ?, updated_at = ? WHERE id = ?",
        (chunk.strategy, chunk.size, chunk.overlap, time.time(), index_id),
    )


def update_settings(conn: Conn, index_id: str, settings: dict[str, Any]) -> None:
    conn.execute(
        "UPDATE indexes SET settings = ?, updated_at = ? WHERE id = ?",
        (json.dumps(settings), time.time(), index_id),
    )


def delete(conn: Conn, index_id: str) -> None:
    conn.execute("DELETE FROM indexes WHERE id = ?", (index_id,))


def probe(conn: Conn) -> None:
    """One cheap read of the catalog; raises the engine's error when it cannot be read."""
    conn.execute("SELECT 1 FROM indexes LIMIT 1").fetchall()


def stats(conn: Conn, index_id: str) -> dict[str, Any]:
    d = conn.execute(
        "SELECT COUNT(*) AS n, COALESCE(SUM(size), 0) AS bytes, MAX(updated_at) AS last FROM documents"
        " WHERE index_id = ?",
        (index_id,),
    ).fetchone()
    c = conn.execute(
        "SELECT COUNT(*) AS n, COALESCE(SUM(token_count), 0) AS tokens FROM chunks WHERE index_id = ?",
        (index_id,),
    ).fetchone()
    return {
        "file_count": d["n"],
        "total_bytes": d["bytes"],
        "chunk_count": c["n"],
        "token_count": c["tokens"],
        "last_updated": d["last"],
    }


# -- the folders ADD_DOCUMENTS was given (reindex walks them again) ------------------------------


def remember_root(conn: Conn, index_id: str, root: str, base: str) -> None:
    conn.execute(
        "INSERT INTO index_roots(index_id, root, base, added_at) VALUES (?,?,?,?)"
        " ON CONFLICT(index_id, root) DO UPDATE SET base=excluded.base",
        (index_id, root, base, time.time()),
    )


def roots(conn: Conn, index_id: str) -> list[tuple[str, str]]:
    """(root, base) of every folder added to the index, by root."""
    return [
        (str(r["root"]), str(r["base"]))
        for r in conn.execute(
            "SELECT root, base FROM index_roots WHERE index_id=? ORDER BY root", (index_id,)
        )
    ]
