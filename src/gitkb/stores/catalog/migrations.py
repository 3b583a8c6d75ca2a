"""Named, ordered schema migrations, recorded in ``migrations``.

Add a new ``mNNN_...`` function at the end of ``MIGRATIONS``; never edit one
that has shipped."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable


def run_script(conn: sqlite3.Connection, script: str) -> None:
    """Run ``;``-separated DDL inside the caller's transaction (``executescript`` would commit)."""
    for stmt in script.split(";"):
        if stmt.strip():
            conn.execute(stmt)


def m001_core(conn: sqlite3.Connection) -> None:
    run_script(
        conn,
        """
        CREATE TABLE indexes (
            id TEXT PRIMARY KEY,
            name TEXT NOT NULL UNIQUE,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            chunk_strategy TEXT,
            chunk_size INTEGER,
            chunk_overlap INTEGER,
            embeddings INTEGER NOT NULL DEFAULT 1,
            embedding_identity TEXT,
            settings TEXT NOT NULL DEFAULT '{}',
            hidden INTEGER NOT NULL DEFAULT 0
        );
        CREATE TABLE documents (
            rowid INTEGER PRIMARY KEY AUTOINCREMENT,
            id TEXT NOT NULL,
            index_id TEXT NOT NULL REFERENCES indexes(id) ON DELETE CASCADE,
            path TEXT NOT NULL,
            title TEXT,
            kind TEXT NOT NULL,
            origin TEXT NOT NULL,
            origin_path TEXT,
            source_uri TEXT,
            content_hash TEXT NOT NULL,
            size INTEGER NOT NULL,
            mtime REAL,
            text TEXT NOT NULL,
            metadata TEXT NOT NULL DEFAULT '{}',
            chunk_strategy TEXT,
            chunk_size INTEGER,
            chunk_overlap INTEGER,
            tenant TEXT,
            tier TEXT,
            expires_at REAL,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            UNIQUE (index_id, path),
            UNIQUE (index_id, id)
        );
        CREATE INDEX documents_id ON documents(id);
        CREATE TABLE chunks (
            rowid INTEGER PRIMARY KEY AUTOINCREMENT,
            id TEXT NOT NULL,
            document_rowid INTEGER NOT NULL REFERENCES documents(rowid) ON DELETE CASCADE,
            index_id TEXT NOT NULL,
            ordinal INTEGER NOT NULL,
            text TEXT NOT NULL,
            content_hash TEXT NOT NULL,
            char_start INTEGER NOT NULL,
            char_end INTEGER NOT NULL,
            line_start INTEGER NOT NULL,
            line_end INTEGER NOT NULL,
            heading_path TEXT NOT NULL DEFAULT '[]',
            token_count INTEGER NOT NULL DEFAULT 0,
            UNIQUE (index_id, id)
        );
        CREATE INDEX chunks_document ON chunks(document_rowid, ordinal);
        CREATE INDEX chunks_hash ON chunks(content_hash);
        CREATE INDEX chunks_index ON chunks(index_id);
        CREATE TABLE changes (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            op TEXT NOT NULL,
            cid INTEGER,
            index_id TEXT,
            document_rowid INTEGER,
            at REAL NOT NULL
        );
        CREATE TABLE watermarks (
            name TEXT PRIMARY KEY,
            seq INTEGER NOT NULL
        );
        CREATE TABLE events (
            id INTEGER PRIMARY KEY,
            at REAL NOT NULL,
            kind TEXT NOT NULL,
            data TEXT NOT NULL DEFAULT '{}'
        );
        """
    )


Migration = Callable[[sqlite3.Connection], None]
MIGRATIONS: list[Migration] = [m001_core]


def migrate(conn: sqlite3.Connection) -> list[str]:
    """Apply the migrations not yet recorded; returns the names applied."""
    conn.execute("CREATE TABLE IF NOT EXISTS migrations (name TEXT PRIMARY KEY, applied_at REAL NOT NULL)")
    done = {r[0] for r in conn.execute("SELECT name FROM migrations")}
    applied = []
    for fn in MIGRATIONS:
        if fn.__name__ in done:
            continue
        fn(conn)
        conn.execute("INSERT INTO migrations(name, applied_at) VALUES (?, ?)", (fn.__name__, time.time()))
        applied.append(fn.__name__)
    return applied

