"""Document and chunk rows and the columns they are read from."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gitkb.core.models import ChunkConfig, ChunkSpan
from gitkb.stores.catalog.engine import Conn


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
_DOC_NAMES = tuple(c.strip() for c in DOC_COLUMNS.split(","))


def doc_from_row(r: Any) -> DocumentRow:
    """A document row read by column name (``DOC_COLUMNS``): ``doc_from_values`` of its values."""
    return doc_from_values([r[c] for c in _DOC_NAMES])


def doc_from_values(v: Sequence[Any]) -> DocumentRow:
    """``doc_from_row`` for a row's values in ``DOC_COLUMNS`` order (by position: a search's hits
    are read by the hundred, and a name lookup on a row costs more than the rest)."""
    meta = v[12]
    return DocumentRow(
        rowid=v[0],
        id=v[1],
        index_id=v[2],
        path=v[3],
        title=v[4],
        kind=v[5],
        origin=v[6],
        origin_path=v[7],
        source_uri=v[8],
        content_hash=v[9],
        size=v[10],
        mtime=v[11],
        metadata=json.loads(meta) if meta and meta != "{}" else {},
        chunk_config=None if v[13] is None else ChunkConfig(v[13], v[14], v[15]),
        tenant=v[16],
        tier=v[17],
        expires_at=v[18],
        created_at=v[19],
        updated_at=v[20],
    )


def chunk_from_values(v: Sequence[Any]) -> ChunkRow:
    """``chunk_from_row`` for a row's values in ``CHUNK_COLUMNS`` order."""
    path = v[11]
    return ChunkRow(
        cid=v[0],
        id=v[1],
        index_id=v[2],
        document_rowid=v[3],
        ordinal=v[4],
        text=v[5],
        content_hash=v[6],
        char_start=v[7],
        char_end=v[8],
        line_start=v[9],
        line_end=v[10],
        heading_path=tuple(json.loads(path)) if path and path != "[]" else (),
        token_count=v[12],
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
_CHUNK_NAMES = tuple(c.strip() for c in CHUNK_COLUMNS.split(","))


def chunk_from_row(r: Any) -> ChunkRow:
    """A chunk row read by column name (``CHUNK_COLUMNS``): ``chunk_from_values`` of its values."""
    return chunk_from_values([r[c] for c in _CHUNK_NAMES])


def get_by_path(conn: Conn, index_id: str, path: str) -> DocumentRow | None:
    r = conn.execute(
        f"SELECT {DOC_COLUMNS} FROM documents WHERE index_id = ? AND path = ?", (index_id, path)
    ).fetchone()
    return doc_from_row(r) if r else None


def get_by_id(conn: Conn, index_id: str, document_id: str) -> DocumentRow | None:
    r = conn.execute(
        f"SELECT {DOC_COLUMNS} FROM documents WHERE index_id = ? AND id = ?", (index_id, document_id)
    ).fetchone()
    return doc_from_row(r) if r else None


def get_text(conn: Conn, rowid: int) -> str:
    r = conn.execute("SELECT text FROM documents WHERE rowid = ?", (rowid,)).fetchone()
    return str(r[0]) if r else ""


def hashes_by_path(conn: Conn, index_id: str) -> dict[str, tuple[str, int, float | None, str | None]]:
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
