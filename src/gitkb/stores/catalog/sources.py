"""Source rows: git repositories feeding indexes, and the files each sync applied.

``settings`` holds what ``source add`` was given (include/exclude globs, the
index names asked for, the forge and the *name* of an admin-configured
credential; older rows may hold environment-variable or secrets-file
references, see ``services.changes.sources.credentials``) -- never a secret value.
``source_files`` is the exact ``path -> blob sha`` state the indexes hold for
a source: the "old" side of a full comparison when history cannot be used.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gitkb.stores.catalog.engine import Conn


@dataclass(frozen=True)
class SourceRow:
    id: str
    name: str
    url: str
    branch: str
    documents_root: str
    settings: dict[str, Any] = field(default_factory=dict)
    synced_commit: str | None = None
    synced_config: str | None = None
    synced_at: float | None = None
    created_at: float = 0.0
    updated_at: float = 0.0
    index_ids: tuple[str, ...] = ()


def new_source_id() -> str:
    return "src_" + uuid.uuid4().hex


def _row(conn: Conn, r: Any) -> SourceRow:
    idx = tuple(
        x[0]
        for x in conn.execute(
            "SELECT si.index_id FROM source_indexes si JOIN indexes i ON i.id = si.index_id"
            " WHERE si.source_id = ? ORDER BY i.name",
            (r["id"],),
        )
    )
    return SourceRow(
        id=r["id"],
        name=r["name"],
        url=r["url"],
        branch=r["branch"],
        documents_root=r["documents_root"],
        settings=json.loads(r["settings"] or "{}"),
        synced_commit=r["synced_commit"],
        synced_config=r["synced_config"],
        synced_at=r["synced_at"],
        created_at=r["created_at"],
        updated_at=r["updated_at"],
        index_ids=idx,
    )


def get_by_name(conn: Conn, name: str) -> SourceRow | None:
    r = conn.execute("SELECT * FROM sources WHERE name = ?", (name,)).fetchone()
    return _row(conn, r) if r else None


def get_by_id(conn: Conn, source_id: str) -> SourceRow | None:
    r = conn.execute("SELECT * FROM sources WHERE id = ?", (source_id,)).fetchone()
    return _row(conn, r) if r else None


def list_all(conn: Conn) -> list[SourceRow]:
    return [_row(conn, r) for r in conn.execute("SELECT * FROM sources ORDER BY name")]


def sources_for_index(conn: Conn, index_id: str) -> list[SourceRow]:
    rows = conn.execute(
        "SELECT s.* FROM sources s JOIN source_indexes si ON si.source_id = s.id WHERE si.index_id = ?"
        " ORDER BY s.name",
        (index_id,),
    ).fetchall()
    return [_row(conn, r) for r in rows]


def insert(
    conn: Conn,
    *,
    source_id: str,
    name: str,
    url: str,
    branch: str,
    documents_root: str,
    settings: Mapping[str, Any],
) -> SourceRow:
    now = time.time()
    conn.execute(
        "INSERT INTO sources(id, name, url, branch, documents_root, settings, created_at, updated_at)"
        " VALUES (?,?,?,?,?,?,?,?)",
        (source_id, name, url, branch, documents_root, json.dumps(dict(settings), sort_keys=True), now, now),
    )
    row = get_by_id(conn, source_id)
    assert row is not None
    return row


def link_index(conn: Conn, source_id: str, index_id: str) -> None:
    conn.execute(
        "INSERT INTO source_indexes(source_id, index_id) VALUES (?, ?) ON CONFLICT DO NOTHING",
        (source_id, index_id),
    )


def delete(conn: Conn, source_id: str) -> None:
    conn.execute("DELETE FROM sources WHERE id = ?", (source_id,))


def set_synced(conn: Conn, source_id: str, commit: str, config_key: str) -> None:
    now = time.time()
    conn.execute(
        "UPDATE sources SET synced_commit = ?, synced_config = ?, synced_at = ?, updated_at = ? WHERE id = ?",
        (commit, config_key, now, now, source_id),
    )


def files(conn: Conn, source_id: str) -> dict[str, str]:
    return {
        r[0]: r[1]
        for r in conn.execute("SELECT path, blob FROM source_files WHERE source_id = ?", (source_id,))
    }


def put_files(conn: Conn, source_id: str, entries: Iterable[tuple[str, str]]) -> None:
    conn.executemany(
        "INSERT INTO source_files(source_id, path, blob) VALUES (?, ?, ?)"
        " ON CONFLICT(source_id, path) DO UPDATE SET blob = excluded.blob",
        [(source_id, p, b) for p, b in entries],
    )


def drop_files(conn: Conn, source_id: str, paths: Iterable[str]) -> None:
    conn.executemany(
        "DELETE FROM source_files WHERE source_id = ? AND path = ?", [(source_id, p) for p in paths]
    )


def index_is_fed(conn: Conn, index_id: str) -> bool:
    r = conn.execute("SELECT 1 FROM source_indexes WHERE index_id = ? LIMIT 1", (index_id,)).fetchone()
    return r is not None
