"""Catalog rows behind embeddings: the saved identity, per-index vector bindings,
rebuild markers, pending vector purges, cost events, and the vector-only log ops.

* ``workspace_state``: small key/value settings the workspace keeps (the active
  embedding identity lives under ``embedding_identity``).
* ``index_vectors``: the identity whose collection is kept in step with an
  index (its *binding*) and the change-log seq it was bound at. An index whose
  binding differs from its effective identity is stranded (``needs_reindex``).
* ``index_rebuilds``: an index being rebuilt (RECHUNK) and its temporary index.
* ``vector_purges``: collections an index could not yet be removed from.

Change-log op ``reembed_index`` (``cid`` NULL): "every live chunk of this index
needs a vector in its bound identity". The keyword index ignores it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from gitkb.stores.catalog.engine import Conn
from gitkb.stores.vector_collections import Naming

REEMBED_OP = "reembed_index"
IDENTITY_KEY = "embedding_identity"
WORKSPACE_ID_KEY = "workspace_id"  # names this workspace's Chroma collections (m025_chroma18_workspace_id)
LEGACY_IDENTITIES_KEY = "vector_legacy_identities"  # JSON list: identities whose collections keep old names


# -- key/value state -----------------------------------------------------------------------------


def get_state(conn: Conn, key: str) -> str | None:
    r = conn.execute("SELECT value FROM workspace_state WHERE key = ?", (key,)).fetchone()
    return None if r is None else str(r[0])


def set_state(conn: Conn, key: str, value: str) -> None:
    conn.execute(
        "INSERT INTO workspace_state(key, value, updated_at) VALUES (?, ?, ?)"
        " ON CONFLICT(key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
        (key, value, time.time()),
    )


def vector_naming(conn: Conn) -> Naming:
    """How this workspace names its collections: its id, and the identities whose collections keep
    the name they had before it had one."""
    legacy = get_state(conn, LEGACY_IDENTITIES_KEY)
    return Naming.of(
        get_state(conn, WORKSPACE_ID_KEY), [str(i) for i in json.loads(legacy)] if legacy else []
    )


# -- bindings ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Binding:
    index_id: str
    identity: str
    since_seq: int


def bindings(conn: Conn) -> dict[str, Binding]:
    return {
        r[0]: Binding(r[0], r[1], int(r[2]))
        for r in conn.execute("SELECT index_id, identity, since_seq FROM index_vectors")
    }


def binding_of(conn: Conn, index_id: str) -> Binding | None:
    r = conn.execute(
        "SELECT index_id, identity, since_seq FROM index_vectors WHERE index_id = ?", (index_id,)
    ).fetchone()
    return None if r is None else Binding(r[0], r[1], int(r[2]))


def bind(conn: Conn, index_id: str, identity: str, since_seq: int) -> None:
    conn.execute(
        "INSERT INTO index_vectors(index_id, identity, since_seq, updated_at) VALUES (?, ?, ?, ?)"
        " ON CONFLICT(index_id) DO UPDATE SET identity = excluded.identity, since_seq = excluded.since_seq,"
        " updated_at = excluded.updated_at",
        (index_id, identity, since_seq, time.time()),
    )


def unbind(conn: Conn, index_id: str) -> None:
    conn.execute("DELETE FROM index_vectors WHERE index_id = ?", (index_id,))


# -- change-log entries only the vector side needs -------------------------------------------------


def log_reembed(conn: Conn, index_id: str) -> int:
    cur = conn.execute(
        "INSERT INTO changes(op, cid, index_id, document_rowid, at) VALUES (?, NULL, ?, NULL, ?) RETURNING seq",
        (REEMBED_OP, index_id, time.time()),
    )
    return int(cur.fetchall()[0][0])


def log_removes(conn: Conn, rows: Iterable[tuple[int, str, int]]) -> None:
    """rows: (cid, index_id, document_rowid) of chunks already deleted (or about to be)."""
    now = time.time()
    conn.executemany(
        "INSERT INTO changes(op, cid, index_id, document_rowid, at) VALUES ('remove', ?, ?, ?, ?)",
        [(c, ix, d, now) for c, ix, d in rows],
    )


def pending_adds(conn: Conn, after_seq: int, index_id: str, since_seq: int) -> int:
    """Change-log entries after ``after_seq`` that give ``index_id`` chunks needing a vector."""
    r = conn.execute(
        "SELECT COUNT(*) FROM changes WHERE index_id = ? AND seq > ? AND seq >= ? AND op IN ('add', ?)",
        (index_id, after_seq, since_seq, REEMBED_OP),
    ).fetchone()
    return int(r[0])


def plain_adds_after(conn: Conn, index_id: str, after_seq: int, since_seq: int) -> int:
    """``add`` entries (re-embeds not counted) for ``index_id`` after ``after_seq``, from ``since_seq`` on."""
    r = conn.execute(
        "SELECT COUNT(*) FROM changes WHERE index_id = ? AND seq > ? AND seq >= ? AND op = 'add'",
        (index_id, after_seq, since_seq),
    ).fetchone()
    return int(r[0])


def has_reembed_after(conn: Conn, index_id: str, after_seq: int, since_seq: int) -> bool:
    """A re-embed entry for ``index_id`` after ``after_seq``, from ``since_seq`` on."""
    return (
        conn.execute(
            "SELECT 1 FROM changes WHERE index_id = ? AND seq > ? AND seq >= ? AND op = ? LIMIT 1",
            (index_id, after_seq, since_seq, REEMBED_OP),
        ).fetchone()
        is not None
    )


def adds_in_range(conn: Conn, index_id: str, after_seq: int, upto_seq: int) -> int:
    """``add`` entries for ``index_id`` with ``after_seq < seq <= upto_seq``."""
    return int(
        conn.execute(
            "SELECT COUNT(*) FROM changes WHERE seq > ? AND seq <= ? AND index_id = ? AND op = 'add'",
            (after_seq, upto_seq, index_id),
        ).fetchone()[0]
    )


def reembeds_in_range(conn: Conn, index_id: str, after_seq: int, upto_seq: int) -> int:
    """Re-embed entries for ``index_id`` with ``after_seq < seq <= upto_seq``."""
    return int(
        conn.execute(
            "SELECT COUNT(*) FROM changes WHERE seq > ? AND seq <= ? AND index_id = ? AND op = ?",
            (after_seq, upto_seq, index_id, REEMBED_OP),
        ).fetchone()[0]
    )


# -- vector-side reads of live chunks ------------------------------------------------------------


@dataclass(frozen=True)
class VectorSource:
    """What embedding one live chunk needs."""

    cid: int
    index_id: str
    document_id: str
    content_hash: str
    tenant: str | None
    text: str


def vector_sources(conn: Conn, cids: Iterable[int]) -> list[VectorSource]:
    out: list[VectorSource] = []
    cids = list(cids)
    for i in range(0, len(cids), 900):
        part = cids[i : i + 900]
        marks = ",".join("?" * len(part))
        out.extend(
            VectorSource(int(r[0]), r[1], r[2], r[3], r[4], r[5])
            for r in conn.execute(
                "SELECT c.rowid, c.index_id, d.id, c.content_hash, d.tenant, c.text FROM chunks c"
                f" JOIN documents d ON d.rowid = c.document_rowid WHERE c.rowid IN ({marks}) ORDER BY c.rowid",
                part,
            )
        )
    return out


def embedding_contexts(
    conn: Conn, cids: Iterable[int]
) -> dict[int, tuple[str | None, list[str], int | None]]:
    """cid -> (document title, heading path, token count): what the model reads around a chunk's text."""
    out: dict[int, tuple[str | None, list[str], int | None]] = {}
    cids = list(cids)
    for i in range(0, len(cids), 900):
        part = cids[i : i + 900]
        for cid, title, hp, n in conn.execute(
            "SELECT c.rowid, d.title, c.heading_path, c.token_count FROM chunks c"
            f" JOIN documents d ON d.rowid = c.document_rowid WHERE c.rowid IN ({','.join('?' * len(part))})",
            part,
        ):
            out[int(cid)] = (title, list(json.loads(hp or "[]")), n)
    return out


def chunk_cids_of_index(conn: Conn, index_id: str) -> list[int]:
    return [
        int(r[0])
        for r in conn.execute("SELECT rowid FROM chunks WHERE index_id = ? ORDER BY rowid", (index_id,))
    ]


# -- rebuild markers -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Rebuild:
    index_id: str
    temp_index_id: str
    temp_index_name: str
    pid: int
    started_at: float


def get_rebuild(conn: Conn, index_id: str) -> Rebuild | None:
    r = conn.execute(
        "SELECT index_id, temp_index_id, temp_index_name, pid, started_at FROM index_rebuilds WHERE index_id = ?",
        (index_id,),
    ).fetchone()
    return None if r is None else Rebuild(r[0], r[1], r[2], int(r[3]), float(r[4]))


def all_rebuilds(conn: Conn) -> list[Rebuild]:
    return [
        Rebuild(r[0], r[1], r[2], int(r[3]), float(r[4]))
        for r in conn.execute(
            "SELECT index_id, temp_index_id, temp_index_name, pid, started_at FROM index_rebuilds"
        )
    ]


def set_rebuild(conn: Conn, rb: Rebuild) -> None:
    conn.execute(
        "INSERT INTO index_rebuilds(index_id, temp_index_id, temp_index_name, pid, started_at) VALUES (?,?,?,?,?)",
        (rb.index_id, rb.temp_index_id, rb.temp_index_name, rb.pid, rb.started_at),
    )


def clear_rebuild(conn: Conn, index_id: str) -> None:
    conn.execute("DELETE FROM index_rebuilds WHERE index_id = ?", (index_id,))


# -- pending purges ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Purge:
    index_id: str
    index_name: str
    identity: str
    error: str | None


def add_purges(conn: Conn, index_id: str, index_name: str, identities: Iterable[str]) -> None:
    now = time.time()
    conn.executemany(
        "INSERT INTO vector_purges(index_id, index_name, identity, error, at) VALUES (?, ?, ?, NULL, ?)"
        " ON CONFLICT(index_id, identity) DO NOTHING",
        [(index_id, index_name, i, now) for i in identities],
    )


def purges(conn: Conn) -> list[Purge]:
    return [
        Purge(r[0], r[1], r[2], r[3])
        for r in conn.execute(
            "SELECT index_id, index_name, identity, error FROM vector_purges ORDER BY at, identity"
        )
    ]


def purge_done(conn: Conn, index_id: str, identity: str) -> None:
    conn.execute("DELETE FROM vector_purges WHERE index_id = ? AND identity = ?", (index_id, identity))


def purge_failed(conn: Conn, index_id: str, identity: str, error: str) -> None:
    conn.execute(
        "UPDATE vector_purges SET error = ?, at = ? WHERE index_id = ? AND identity = ?",
        (error, time.time(), index_id, identity),
    )


# -- events --------------------------------------------------------------------------------------


def add_event(conn: Conn, kind: str, data: dict[str, Any]) -> None:
    conn.execute(
        "INSERT INTO events(at, kind, data) VALUES (?, ?, ?)",
        (time.time(), kind, json.dumps(data, sort_keys=True)),
    )


def events(conn: Conn, kind: str, limit: int = 20) -> list[dict[str, Any]]:
    return [
        {"at": r[0], **json.loads(r[1])}
        for r in conn.execute(
            "SELECT at, data FROM events WHERE kind = ? ORDER BY id DESC LIMIT ?", (kind, limit)
        )
    ]
