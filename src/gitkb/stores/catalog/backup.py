"""The catalog's side of ``gitkb backup`` / ``gitkb restore``: a consistent copy taken while others
write, what it holds, and the checks a copy passes before it becomes a workspace's catalog.

SQLite: ``sqlite3.Connection.backup`` (the online backup API) copies every page in one step from a
fresh read connection, so the copy is one snapshot even while the writer commits (WAL: readers do
not block it). The copy is switched to ``journal_mode=DELETE`` so it is one self-contained file.

A backend without a file to copy (PostgreSQL) exports table by table instead: ``TABLE_ROWS`` is the
archive format for that (one JSON-lines file per table, ``catalog/tables/<table>.jsonl``, its row
count in the manifest), written and loaded by ``table_rows``; ``copy_online`` here is the SQLite path.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from gitkb.core.errors import StoreUnavailable, ValidationFailed
from gitkb.stores.catalog.migrations import MIGRATIONS

SQLITE_FILE = "sqlite-database"  # the archive holds the database file as the backup API wrote it
TABLE_ROWS = "table-rows"  # the archive holds catalog/tables/<table>.jsonl (a logical export)


@contextmanager
def _open(path: Path, *, readonly: bool = False) -> Iterator[sqlite3.Connection]:
    uri = f"file:{path}?mode=ro" if readonly else f"file:{path}"
    try:
        conn = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=30)
    except sqlite3.Error as exc:
        raise StoreUnavailable(f"cannot open the catalog at {path}: {exc}") from exc
    try:
        yield conn
    finally:
        conn.close()


def copy_online(source: Path, dest: Path) -> None:
    """Copy the catalog at ``source`` to ``dest`` (a new file) with the online backup API."""
    with _open(source, readonly=True) as src, _open(dest) as out:
        try:
            src.backup(out)  # pages=-1: every page in one step, one snapshot
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"the catalog backup failed: {exc}") from exc
        out.execute("PRAGMA journal_mode=DELETE")


def table_counts(path: Path) -> dict[str, int]:
    """Rows per table of the catalog file at ``path`` (SQLite's own tables left out)."""
    with _open(path, readonly=True) as conn:
        names = [
            r[0]
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
            )
        ]
        return {n: int(conn.execute(f'SELECT COUNT(*) FROM "{n}"').fetchone()[0]) for n in names}


def migrations_applied(path: Path) -> list[str]:
    with _open(path, readonly=True) as conn:
        try:
            return [r[0] for r in conn.execute("SELECT name FROM migrations ORDER BY name")]
        except sqlite3.Error:
            return []


def sources(path: Path) -> list[tuple[str, str, str, str]]:
    """``(id, name, url, branch)`` of every source in the catalog file at ``path``."""
    with _open(path, readonly=True) as conn:
        return [
            (str(r[0]), str(r[1]), str(r[2]), str(r[3]))
            for r in conn.execute("SELECT id, name, url, branch FROM sources ORDER BY name")
        ]


def check_copy(path: Path) -> None:
    """A restored catalog file is a sound SQLite database (``ValidationFailed`` when not)."""
    try:
        with _open(path, readonly=True) as conn:
            verdict = conn.execute("PRAGMA integrity_check").fetchone()
    except (sqlite3.Error, StoreUnavailable) as exc:
        raise ValidationFailed(f"the archive's catalog is not a usable SQLite database: {exc}") from exc
    if not verdict or verdict[0] != "ok":
        raise ValidationFailed(f"the archive's catalog fails SQLite's integrity check: {verdict}")


def unknown_migrations(path: Path) -> list[str]:
    """Migrations the catalog file at ``path`` records that this gitkb does not know (a newer gitkb's)."""
    known = {fn.__name__ for fn in MIGRATIONS}
    return [m for m in migrations_applied(path) if m not in known]


def _schema(conn: sqlite3.Connection) -> set[tuple[str, str, str, str]]:
    """``(type, name, table, sql)`` of every schema object, the SQL with its whitespace collapsed;
    SQLite's own statistics tables (``ANALYZE``) are left out."""
    rows = conn.execute("SELECT type, name, tbl_name, COALESCE(sql, '') FROM sqlite_master")
    return {
        (str(t), str(n), str(tb), " ".join(str(sql).split()))
        for t, n, tb, sql in rows
        if not str(n).startswith("sqlite_stat")
    }


def schema_differences(path: Path) -> list[str]:
    """What the catalog file at ``path`` holds beyond, or differs in from, the schema this gitkb's
    migrations make (those it records, in order): an extra table, view, index or trigger (a trigger
    runs on every write, e.g. to approve a review or erase the audit), or an altered definition."""
    done = set(migrations_applied(path))
    reference = sqlite3.connect(":memory:", isolation_level=None)
    try:
        reference.execute(
            "CREATE TABLE IF NOT EXISTS migrations (name TEXT PRIMARY KEY, applied_at REAL NOT NULL)"
        )
        for fn in MIGRATIONS:
            if fn.__name__ in done:
                fn(reference)
        want = _schema(reference)
    finally:
        reference.close()
    with _open(path, readonly=True) as conn:
        conn.execute("PRAGMA trusted_schema=OFF")
        got = _schema(conn)
    extra = [f"{t} {n} ({sql[:120]})" for t, n, _tb, sql in sorted(got - want)]
    missing = [
        f"{t} {n}" for t, n, _tb, _sql in sorted(want - got) if (t, n) not in {(g[0], g[1]) for g in got}
    ]
    return extra + [f"missing {m}" for m in missing]
