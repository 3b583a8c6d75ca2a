"""declarative: named, ordered schema migrations (SQL), recorded in ``migrations``.

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
        """,
    )


def m002_jobs_and_writer(conn: sqlite3.Connection) -> None:
    run_script(
        conn,
        """
        CREATE TABLE jobs (
            id TEXT PRIMARY KEY,
            kind TEXT NOT NULL,
            params TEXT NOT NULL DEFAULT '{}',
            state TEXT NOT NULL,
            progress_done INTEGER NOT NULL DEFAULT 0,
            progress_total INTEGER NOT NULL DEFAULT 0,
            progress_note TEXT,
            result TEXT,
            error TEXT,
            error_code TEXT,
            caller TEXT,
            dedupe_key TEXT,
            runner TEXT,
            attempts INTEGER NOT NULL DEFAULT 0,
            cancel_requested INTEGER NOT NULL DEFAULT 0,
            created_at REAL NOT NULL,
            started_at REAL,
            finished_at REAL
        );
        CREATE INDEX jobs_state ON jobs(state, created_at);
        CREATE INDEX jobs_dedupe ON jobs(dedupe_key, state);
        CREATE TABLE writer_state (
            key TEXT PRIMARY KEY,
            value TEXT NOT NULL
        );
        CREATE TABLE index_roots (
            index_id TEXT NOT NULL REFERENCES indexes(id) ON DELETE CASCADE,
            root TEXT NOT NULL,
            base TEXT NOT NULL,
            added_at REAL NOT NULL,
            PRIMARY KEY (index_id, root)
        );
        CREATE TABLE skipped_files (
            index_id TEXT NOT NULL REFERENCES indexes(id) ON DELETE CASCADE,
            path TEXT NOT NULL,
            category TEXT NOT NULL,
            detail TEXT NOT NULL,
            at REAL NOT NULL,
            PRIMARY KEY (index_id, path)
        )
        """,
    )


def m003_embeddings(conn: sqlite3.Connection) -> None:
    """Embedding identity, per-index vector bindings, rebuild markers, pending vector purges."""
    run_script(
        conn,
        """
        CREATE TABLE workspace_state (
            key TEXT PRIMARY KEY,
            value TEXT NOT NULL,
            updated_at REAL NOT NULL
        );
        CREATE TABLE index_vectors (
            index_id TEXT PRIMARY KEY REFERENCES indexes(id) ON DELETE CASCADE,
            identity TEXT NOT NULL,
            since_seq INTEGER NOT NULL,
            updated_at REAL NOT NULL
        );
        CREATE TABLE index_rebuilds (
            index_id TEXT PRIMARY KEY,
            temp_index_id TEXT NOT NULL,
            temp_index_name TEXT NOT NULL,
            pid INTEGER NOT NULL,
            started_at REAL NOT NULL
        );
        CREATE TABLE vector_purges (
            index_id TEXT NOT NULL,
            index_name TEXT NOT NULL,
            identity TEXT NOT NULL,
            error TEXT,
            at REAL NOT NULL,
            PRIMARY KEY (index_id, identity)
        );
        CREATE INDEX changes_index ON changes(index_id, seq)
        """,
    )


def m004_sources_proposals_reviews(conn: sqlite3.Connection) -> None:
    """Git sources, their synced files, proposals, action reviews, local change requests, audit log."""
    run_script(
        conn,
        """
        CREATE TABLE sources (
            id TEXT PRIMARY KEY,
            name TEXT NOT NULL UNIQUE,
            url TEXT NOT NULL,
            branch TEXT NOT NULL,
            documents_root TEXT NOT NULL DEFAULT '',
            settings TEXT NOT NULL DEFAULT '{}',
            synced_commit TEXT,
            synced_config TEXT,
            synced_at REAL,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL
        );
        CREATE TABLE source_indexes (
            source_id TEXT NOT NULL REFERENCES sources(id) ON DELETE CASCADE,
            index_id TEXT NOT NULL REFERENCES indexes(id) ON DELETE CASCADE,
            PRIMARY KEY (source_id, index_id)
        );
        CREATE INDEX source_indexes_index ON source_indexes(index_id);
        CREATE TABLE source_files (
            source_id TEXT NOT NULL REFERENCES sources(id) ON DELETE CASCADE,
            path TEXT NOT NULL,
            blob TEXT NOT NULL,
            PRIMARY KEY (source_id, path)
        );
        CREATE TABLE proposals (
            id TEXT PRIMARY KEY,
            source_id TEXT NOT NULL REFERENCES sources(id) ON DELETE CASCADE,
            op TEXT NOT NULL,
            path TEXT NOT NULL,
            new_path TEXT,
            note TEXT NOT NULL DEFAULT '',
            parent_sha TEXT NOT NULL,
            commit_sha TEXT NOT NULL,
            state TEXT NOT NULL,
            detail TEXT NOT NULL DEFAULT '{}',
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL
        );
        CREATE INDEX proposals_source ON proposals(source_id, state, created_at);
        CREATE TABLE reviews (
            id TEXT PRIMARY KEY,
            source_id TEXT NOT NULL REFERENCES sources(id) ON DELETE CASCADE,
            index_id TEXT,
            branch TEXT NOT NULL,
            base_branch TEXT NOT NULL,
            base_sha TEXT NOT NULL,
            head_sha TEXT NOT NULL,
            push_sha TEXT NOT NULL,
            expected_remote_sha TEXT,
            title TEXT NOT NULL,
            body TEXT NOT NULL,
            commit_message TEXT NOT NULL DEFAULT '',
            diff TEXT NOT NULL,
            changed_files TEXT NOT NULL DEFAULT '[]',
            proposal_ids TEXT NOT NULL DEFAULT '[]',
            state TEXT NOT NULL,
            pushed INTEGER NOT NULL DEFAULT 0,
            push_error TEXT,
            cr_number INTEGER,
            cr_url TEXT,
            requested_by TEXT,
            reviewer TEXT,
            reason TEXT,
            decided_at REAL,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL
        );
        CREATE INDEX reviews_source ON reviews(source_id, state);
        CREATE TABLE change_requests (
            repo TEXT NOT NULL,
            number INTEGER NOT NULL,
            head TEXT NOT NULL,
            base TEXT NOT NULL,
            title TEXT NOT NULL,
            body TEXT NOT NULL,
            state TEXT NOT NULL,
            merged INTEGER NOT NULL DEFAULT 0,
            merge_commit_sha TEXT,
            base_sha TEXT,
            head_sha TEXT,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            PRIMARY KEY (repo, number)
        );
        CREATE TABLE audit (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            at REAL NOT NULL,
            actor TEXT NOT NULL,
            action TEXT NOT NULL,
            target TEXT NOT NULL,
            result TEXT NOT NULL,
            detail TEXT NOT NULL DEFAULT '{}'
        )
        """,
    )


def m005_knowledge_bases(conn: sqlite3.Connection) -> None:
    """Knowledge bases (kidx_ ids), agents, their read-only/read-write bindings, per-agent usage events."""
    run_script(
        conn,
        """
        CREATE TABLE knowledge_bases (
            id TEXT PRIMARY KEY,
            name TEXT NOT NULL UNIQUE,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL
        );
        CREATE TABLE kb_indexes (
            kb_id TEXT NOT NULL REFERENCES knowledge_bases(id) ON DELETE CASCADE,
            index_id TEXT NOT NULL,
            position INTEGER NOT NULL,
            PRIMARY KEY (kb_id, index_id)
        );
        CREATE INDEX kb_indexes_index ON kb_indexes(index_id);
        CREATE TABLE agents (
            id TEXT PRIMARY KEY,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            default_top_k INTEGER NOT NULL DEFAULT 10
        );
        CREATE TABLE agent_kbs (
            agent_id TEXT NOT NULL REFERENCES agents(id) ON DELETE CASCADE,
            kb_id TEXT NOT NULL REFERENCES knowledge_bases(id) ON DELETE CASCADE,
            read_only INTEGER NOT NULL DEFAULT 0,
            created_at REAL NOT NULL,
            PRIMARY KEY (agent_id, kb_id)
        );
        CREATE TABLE agent_events (
            id INTEGER PRIMARY KEY,
            at REAL NOT NULL,
            agent_id TEXT NOT NULL,
            kind TEXT NOT NULL,
            count INTEGER NOT NULL DEFAULT 0,
            tokens INTEGER NOT NULL DEFAULT 0,
            duration_ms REAL NOT NULL DEFAULT 0,
            data TEXT NOT NULL DEFAULT '{}'
        );
        CREATE INDEX agent_events_agent ON agent_events(agent_id, kind, at)
    """,
    )


def m006_webhooks(conn: sqlite3.Connection) -> None:
    """Webhook deliveries (replay protection by delivery id) and per-source webhook secrets."""
    run_script(
        conn,
        """
        CREATE TABLE webhook_deliveries (
            provider TEXT NOT NULL,
            delivery_id TEXT NOT NULL,
            source_id TEXT,
            commit_sha TEXT,
            event TEXT NOT NULL,
            job_id TEXT,
            received_at REAL NOT NULL,
            PRIMARY KEY (provider, delivery_id)
        );
        CREATE TABLE webhook_secrets (
            source_id TEXT PRIMARY KEY REFERENCES sources(id) ON DELETE CASCADE,
            secret TEXT NOT NULL,
            set_at REAL NOT NULL
        )
        """,
    )


def m007_documents_tenant(conn: sqlite3.Connection) -> None:
    """Tenant counts per index from an index alone (SEARCH's tenant warnings read no document rows)."""
    run_script(conn, "CREATE INDEX documents_tenant ON documents(index_id, tenant, expires_at)")


def m008_binding_modes(conn: sqlite3.Connection) -> None:
    """Agent bindings get a mode (read, propose, write); existing read-write bindings keep writing."""
    run_script(
        conn,
        """
        ALTER TABLE agent_kbs ADD COLUMN mode TEXT NOT NULL DEFAULT 'propose';
        UPDATE agent_kbs SET mode = CASE read_only WHEN 1 THEN 'read' ELSE 'write' END
        """,
    )


def m014_vector_outcomes(conn: sqlite3.Connection) -> None:
    """How each chunk a change-log entry asked for got its vector (see stores/catalog/vector_outcomes.py):
    written as the work is done, so a caller counts the work on its chunks whoever did it."""
    run_script(
        conn,
        """
        CREATE TABLE vector_outcomes (
            identity TEXT NOT NULL,
            seq INTEGER NOT NULL,
            cid INTEGER NOT NULL,
            how INTEGER NOT NULL,
            texts INTEGER NOT NULL DEFAULT 0,
            tokens INTEGER NOT NULL DEFAULT 0,
            seconds REAL NOT NULL DEFAULT 0,
            at REAL NOT NULL,
            PRIMARY KEY (identity, seq, cid)
        ) WITHOUT ROWID;
        CREATE INDEX vector_outcomes_at ON vector_outcomes(at)
        """,
    )


def m009_reviews_overwrites(conn: sqlite3.Connection) -> None:
    """What approving a review overwrites on the remote branch (commits others pushed), and the push in flight.

    ``overwrites``: JSON list of ``{sha, author, message}`` last computed against the remote;
    ``pushing_sha``: set just before the push and cleared once the push and the change request
    are recorded, so a process killed in between is reconciled with the remote afterwards.
    """
    run_script(
        conn,
        """
        ALTER TABLE reviews ADD COLUMN overwrites TEXT NOT NULL DEFAULT '[]';
        ALTER TABLE reviews ADD COLUMN pushing_sha TEXT
        """,
    )


def m010_ui_sessions(conn: sqlite3.Connection) -> None:
    """Web page login sessions (the cookie holds a random id; only its digest is stored)."""
    run_script(
        conn,
        """
        CREATE TABLE ui_sessions (
            id_sha256 TEXT PRIMARY KEY,
            token_name TEXT NOT NULL,
            token_sha256 TEXT NOT NULL,
            created_at REAL NOT NULL,
            expires_at REAL NOT NULL
        );
        CREATE INDEX ui_sessions_expiry ON ui_sessions(expires_at)
        """,
    )


def m014_document_overrides(conn: sqlite3.Connection) -> None:
    """Files on disk a user deleted (new_path NULL) or renamed through gitkb: reindex keeps that."""
    run_script(
        conn,
        """
        CREATE TABLE document_overrides (
            index_id TEXT NOT NULL REFERENCES indexes(id) ON DELETE CASCADE,
            origin_path TEXT NOT NULL,
            new_path TEXT,
            at REAL NOT NULL,
            PRIMARY KEY (index_id, origin_path)
        )
        """,
    )


Migration = Callable[[sqlite3.Connection], None]


def m012_job_staged_texts(conn: sqlite3.Connection) -> None:
    """Bulky job parameters (ADD_TEXT's text) live here while the job is queued or running,
    and are deleted when it finishes, so the job table keeps no copy of every text."""
    run_script(
        conn,
        """
        CREATE TABLE job_staged (
            job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
            key TEXT NOT NULL,
            value TEXT NOT NULL,
            PRIMARY KEY (job_id, key)
        )
        """,
    )


_RETIRE_COLUMNS = (
    "chunk_id, index_id, document_id, path, source_uri, origin, metadata, line_start, line_end,"
    " char_start, char_end, text, retired_at"
)


def m021_retired_chunks(conn: sqlite3.Connection) -> None:
    """Chunk ids that left the index keep their last document, ``source_uri`` and lines, so an old
    citation can still be checked (``cite_check`` answers ``stale``). Triggers record them on every
    path: a document whose text changes or that is deleted retires its chunks with the values it had
    (``INSERT OR REPLACE``: the last time wins); a chunk removed on its own (RECHUNK) with its
    document's values now, unless already recorded."""
    run_script(
        conn,
        """
        CREATE TABLE retired_chunks (
            chunk_id TEXT NOT NULL,
            index_id TEXT NOT NULL,
            document_id TEXT NOT NULL,
            path TEXT NOT NULL,
            source_uri TEXT,
            origin TEXT NOT NULL,
            metadata TEXT NOT NULL DEFAULT '{}',
            line_start INTEGER NOT NULL,
            line_end INTEGER NOT NULL,
            char_start INTEGER NOT NULL,
            char_end INTEGER NOT NULL,
            text TEXT NOT NULL,
            retired_at REAL NOT NULL,
            PRIMARY KEY (chunk_id, index_id)
        );
        CREATE INDEX retired_chunks_id ON retired_chunks(chunk_id, retired_at)
        """,
    )
    now = "(julianday('now') - 2440587.5) * 86400.0"
    old_doc = (
        f"INSERT OR REPLACE INTO retired_chunks({_RETIRE_COLUMNS})"
        " SELECT c.id, OLD.index_id, OLD.id, OLD.path, OLD.source_uri, OLD.origin, OLD.metadata, c.line_start,"
        f" c.line_end, c.char_start, c.char_end, c.text, {now} FROM chunks c WHERE c.document_rowid = OLD.rowid;"
    )
    conn.execute(  # a trigger body holds ';', so not through run_script
        "CREATE TRIGGER documents_retire_on_change BEFORE UPDATE OF content_hash ON documents"
        f" WHEN OLD.content_hash IS NOT NEW.content_hash BEGIN {old_doc} END"
    )
    conn.execute(f"CREATE TRIGGER documents_retire_on_delete BEFORE DELETE ON documents BEGIN {old_doc} END")
    conn.execute(
        "CREATE TRIGGER chunks_retire BEFORE DELETE ON chunks"
        " WHEN EXISTS (SELECT 1 FROM documents WHERE rowid = OLD.document_rowid) BEGIN"
        f" INSERT OR IGNORE INTO retired_chunks({_RETIRE_COLUMNS})"
        " SELECT OLD.id, d.index_id, d.id, d.path, d.source_uri, d.origin, d.metadata, OLD.line_start,"
        f" OLD.line_end, OLD.char_start, OLD.char_end, OLD.text, {now} FROM documents d"
        " WHERE d.rowid = OLD.document_rowid; END"
    )


def m020_checkouts(conn: sqlite3.Connection) -> None:
    """Read-only working copies (``gitkb checkout``) each node made: refreshed when the synced commit moves."""
    run_script(
        conn,
        """
        CREATE TABLE checkouts (
            id TEXT PRIMARY KEY,
            source_id TEXT NOT NULL REFERENCES sources(id) ON DELETE CASCADE,
            node TEXT NOT NULL,
            path TEXT NOT NULL,
            commit_id TEXT NOT NULL,
            created_at REAL NOT NULL,
            refreshed_at REAL NOT NULL,
            UNIQUE (node, path)
        )
        """,
    )


def m022_nodes18_lease_nodes(conn: sqlite3.Connection) -> None:
    """Nodes that share one catalog (part nodes18): the writer lease as a row with a heartbeat, each
    node's row (heartbeat, the name of its keyword watermark), and the change log's compacted floor."""
    run_script(
        conn,
        """
        CREATE TABLE writer_lease (
            name TEXT PRIMARY KEY,
            token TEXT NOT NULL,
            node_id TEXT NOT NULL,
            host TEXT NOT NULL,
            pid INTEGER NOT NULL,
            acquired_at REAL NOT NULL,
            renewed_at REAL NOT NULL
        );
        CREATE TABLE nodes (
            id TEXT PRIMARY KEY,
            host TEXT NOT NULL,
            pid INTEGER NOT NULL,
            home TEXT NOT NULL,
            keywords_mark TEXT NOT NULL,
            started_at REAL NOT NULL,
            heartbeat_at REAL NOT NULL
        );
        CREATE TABLE changes_floor (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            seq INTEGER NOT NULL,
            removed INTEGER NOT NULL,
            compacted_at REAL NOT NULL
        )
        """,
    )


def m023_nodes18_proposal_specs(conn: sqlite3.Connection) -> None:
    """Each staged proposal commit as data (part nodes18): the branch can be rebuilt on any node."""
    run_script(
        conn,
        """
        CREATE TABLE proposal_specs (
            proposal_id TEXT PRIMARY KEY REFERENCES proposals(id) ON DELETE CASCADE,
            parent_sha TEXT NOT NULL,
            commit_sha TEXT NOT NULL,
            spec TEXT NOT NULL,
            recorded_at REAL NOT NULL
        )
        """,
    )


MIGRATIONS: list[Migration] = [
    m001_core,
    m002_jobs_and_writer,
    m003_embeddings,
    m004_sources_proposals_reviews,
    m005_knowledge_bases,
    m006_webhooks,
    m007_documents_tenant,
    m008_binding_modes,
    m009_reviews_overwrites,
    m010_ui_sessions,
    m012_job_staged_texts,
    m014_vector_outcomes,
    m014_document_overrides,
    m021_retired_chunks,
    m020_checkouts,
    m022_nodes18_lease_nodes,
    m023_nodes18_proposal_specs,
]


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
