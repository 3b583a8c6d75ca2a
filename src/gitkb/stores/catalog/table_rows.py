"""The ``table-rows`` catalog export of ``gitkb backup`` (a PostgreSQL catalog: no file to copy) and
its import into an empty catalog, PostgreSQL or SQLite.

Export: one REPEATABLE READ read transaction (``catalog.read()``: one snapshot while the writer
commits), every table in migration order (``table_order``: the order the migrations create them,
so a row's parent is always imported before it), one ``catalog/tables/<table>.jsonl`` per table:
its first line the column names, then one JSON array per row. Values keep their types: integers,
floats (``repr``: exact), text (JSON text stays a string), NULL as ``null``, bytes as
``{"b64": ...}`` (the only JSON object a row holds). Identity counters (PostgreSQL sequences) go
with them (``counters``), so a restore never hands out an id a deleted row once had.

Import: ``import_rows`` into a catalog whose tables hold no rows (``ValidationFailed`` otherwise),
in one write transaction, each table's row count checked against the manifest's, then every
identity counter set past the restored ids (PostgreSQL ``setval``, SQLite ``sqlite_sequence``).
"""

from __future__ import annotations

import base64
import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gitkb.core.errors import ValidationFailed
from gitkb.stores.catalog.backup import RUNTIME_TABLES, TABLE_ROWS
from gitkb.stores.catalog.engine import Conn, dialect_of
from gitkb.stores.catalog.migrations import MIGRATIONS, migrate

TABLES_DIR = "catalog/tables"


def table_order(applied: list[str] | None = None) -> list[str]:
    """The catalog's tables in the order the migrations create them (an in-memory SQLite catalog), of
    every migration or of those ``applied`` only (a catalog at an older schema)."""
    conn = sqlite3.connect(":memory:", isolation_level=None)
    try:
        if applied is None:
            migrate(conn)
        else:
            conn.execute("CREATE TABLE migrations (name TEXT PRIMARY KEY, applied_at REAL NOT NULL)")
            for fn in MIGRATIONS:
                if fn.__name__ in applied:
                    fn(conn)
        return [
            r[0]
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY rowid"
            )
        ]
    finally:
        conn.close()


def encode_value(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"b64": base64.b64encode(bytes(value)).decode()}
    return value


def decode_value(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) != {"b64"} or not isinstance(value["b64"], str):
            raise ValidationFailed(f"the archive's catalog holds an unknown value {value!r:.80}")
        return base64.b64decode(value["b64"], validate=True)
    return value


def _columns(conn: Conn, table: str) -> list[str]:
    if dialect_of(conn).name == "postgresql":
        rows = conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema()"
            " AND table_name = ? ORDER BY ordinal_position",
            (table,),
        ).fetchall()
        return [str(r[0]) for r in rows]
    return [str(r[1]) for r in conn.execute(f'PRAGMA table_info("{table}")')]


def _stream(conn: Conn, sql: str) -> Iterator[Any]:
    """The rows of ``sql`` a batch at a time: on PostgreSQL a server-side cursor in the caller's
    transaction (a plain cursor would hold a whole table in memory); SQLite's cursor streams."""
    raw = getattr(conn, "raw", None)
    if dialect_of(conn).name != "postgresql" or raw is None:
        yield from conn.execute(sql)
        return
    with raw.cursor(name="gitkb_table_rows") as cur:
        cur.itersize = 2000
        cur.execute(sql)
        yield from cur


def _tables(conn: Conn) -> list[str]:
    if dialect_of(conn).name == "postgresql":
        rows = conn.execute(
            "SELECT table_name FROM information_schema.tables"
            " WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'"
        ).fetchall()
    else:
        rows = conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        ).fetchall()
    return [str(r[0]) for r in rows]


def _counters(conn: Conn) -> dict[str, int]:
    """``table.column`` -> the last value its identity sequence gave (PostgreSQL's sequences, SQLite's
    ``sqlite_sequence`` of its AUTOINCREMENT keys)."""
    out: dict[str, int] = {}
    if dialect_of(conn).name != "postgresql":
        has = conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'sqlite_sequence'").fetchone()
        for table, seq in conn.execute("SELECT name, seq FROM sqlite_sequence").fetchall() if has else []:
            keys = [str(r[1]) for r in conn.execute(f'PRAGMA table_info("{table}")') if int(r[5]) == 1]
            if len(keys) == 1:
                out[f"{table}.{keys[0]}"] = int(seq)
        return out
    for table, column in conn.execute(
        "SELECT table_name, column_name FROM information_schema.columns"
        " WHERE table_schema = current_schema() AND is_identity = 'YES' ORDER BY table_name, column_name"
    ).fetchall():
        seq = conn.execute("SELECT pg_get_serial_sequence(?, ?)", (f'"{table}"', column)).fetchone()[0]
        row = conn.execute(f"SELECT last_value, is_called FROM {seq}").fetchone()
        out[f"{table}.{column}"] = int(row[0]) if row[1] else 0
    return out


def export(conn: Conn, into: Path) -> dict[str, Any]:
    """Write every table of the catalog ``conn`` reads (one snapshot: the caller's read
    transaction) under ``into/catalog/tables``; its tables, row counts, columns, counters and
    migrations for the manifest. A catalog at an older schema exports the tables its migrations made."""
    migrations = migrations_applied(conn)
    if unknown := unknown_migrations(migrations):
        raise ValidationFailed(
            f"the catalog records migrations this gitkb does not know ({unknown}): a newer gitkb's catalog;"
            " back it up with that gitkb"
        )
    order = table_order(migrations)
    if extra := sorted(set(_tables(conn)) - set(order)):
        raise ValidationFailed(
            f"the catalog holds tables this gitkb's migrations do not make ({extra}): a newer gitkb's "
            "catalog; back it up with that gitkb"
        )
    folder = into / TABLES_DIR
    folder.mkdir(parents=True, mode=0o700)
    counts: dict[str, int] = {}
    columns: dict[str, list[str]] = {}
    for table in order:
        cols = _columns(conn, table)
        if not cols:
            raise ValidationFailed(f"the catalog has no table {table}: its schema is not this gitkb's")
        quoted = ", ".join(f'"{c}"' for c in cols)
        n = 0
        with open(folder / f"{table}.jsonl", "w", encoding="utf-8") as f:
            f.write(json.dumps(cols) + "\n")
            rows = iter(()) if table in RUNTIME_TABLES else _stream(conn, f'SELECT {quoted} FROM "{table}"')
            for row in rows:
                f.write(json.dumps([encode_value(v) for v in row], ensure_ascii=False) + "\n")
                n += 1
        counts[table], columns[table] = n, cols
    return {
        "order": list(counts),
        "tables": counts,
        "columns": columns,
        "counters": _counters(conn),
        "migrations": migrations,
    }


def unknown_migrations(applied: list[str]) -> list[str]:
    known = {fn.__name__ for fn in MIGRATIONS}
    return [m for m in applied if m not in known]


# Rows the migrations of a new catalog write (m025_chroma18_workspace_id: its workspace id): an import
# target holds them, and the archive's own rows replace them.
_MIGRATION_ROWS = {"workspace_state": "key IN ('workspace_id', 'vector_legacy_identities')"}


def rows_held(conn: Conn) -> dict[str, int]:
    """Tables of this catalog that hold rows (the ``migrations`` record and the rows its migrations
    wrote left out): an import target must have none."""
    out = {}
    for table in table_order(migrations_applied(conn)):  # the tables of its own schema (maybe older)
        if table == "migrations":
            continue
        made = f" WHERE NOT ({_MIGRATION_ROWS[table]})" if table in _MIGRATION_ROWS else ""
        n = int(conn.execute(f'SELECT COUNT(*) FROM "{table}"{made}').fetchone()[0])
        if n:
            out[table] = n
    return out


def import_rows(conn: Conn, files: Path, catalog: dict[str, Any]) -> dict[str, int]:
    """Load the export at ``files`` (``catalog``: the manifest's entry) into the empty catalog
    ``conn`` writes (the caller's write transaction); the rows per table."""
    if held := rows_held(conn):
        raise ValidationFailed(
            f"the target catalog already holds gitkb rows ({', '.join(f'{t}: {n}' for t, n in sorted(held.items()))});"
            " restore into an empty database only; nothing was written"
        )
    pg = dialect_of(conn).name == "postgresql"
    want = catalog.get("tables")
    if not isinstance(want, dict):
        raise ValidationFailed("the archive's manifest lists no catalog tables")
    order = [t for t in table_order() if t in want]
    if extra := sorted(set(want) - set(order)):
        raise ValidationFailed(f"the archive holds tables this gitkb does not know: {extra}")
    conn.execute("DELETE FROM migrations")  # the archive's own record replaces the target's
    for table, made in _MIGRATION_ROWS.items():  # and its rows those the target's migrations wrote
        conn.execute(f'DELETE FROM "{table}" WHERE {made}')
    got: dict[str, int] = {}
    for table in order:
        path = files / TABLES_DIR / f"{table}.jsonl"
        if not path.is_file():
            raise ValidationFailed(f"the archive has no rows file for table {table}")
        got[table] = _load(conn, table, path, pg)
        if got[table] != want[table]:
            raise ValidationFailed(
                f"the archive's table {table} holds {got[table]} rows, its manifest says {want[table]}"
            )
    _set_counters(conn, catalog.get("counters") or {}, pg)
    return got


def _load(conn: Conn, table: str, path: Path, pg: bool) -> int:
    known = set(_columns(conn, table)) | ({"rowid"} if not pg else set())
    n = 0
    with open(path, encoding="utf-8") as f:
        header = f.readline()
        cols = json.loads(header) if header else None
        if not isinstance(cols, list) or not cols or not all(isinstance(c, str) for c in cols):
            raise ValidationFailed(f"the archive's rows file for {table} has no column header")
        if unknown := [c for c in cols if c not in known]:
            raise ValidationFailed(f"the archive's table {table} has columns this catalog lacks: {unknown}")
        override = " OVERRIDING SYSTEM VALUE" if pg else ""
        sql = (
            f'INSERT INTO "{table}" ({", ".join(f"{chr(34)}{c}{chr(34)}" for c in cols)}){override}'
            f" VALUES ({', '.join('?' * len(cols))})"
        )
        batch: list[list[Any]] = []
        for line in f:
            values = json.loads(line)
            if not isinstance(values, list) or len(values) != len(cols):
                raise ValidationFailed(f"the archive's table {table} has a malformed row")
            batch.append([decode_value(v) for v in values])
            n += 1
            if len(batch) >= 500:
                conn.executemany(sql, batch)
                batch = []
        if batch:
            conn.executemany(sql, batch)
    return n


def _set_counters(conn: Conn, counters: dict[str, Any], pg: bool) -> None:
    """Every identity column's counter past the largest restored id (and past the source's
    counter: an id a deleted row had is not given again)."""
    if pg:
        idents = conn.execute(
            "SELECT table_name, column_name FROM information_schema.columns"
            " WHERE table_schema = current_schema() AND is_identity = 'YES'"
        ).fetchall()
        for table, column in idents:
            top = conn.execute(f'SELECT COALESCE(MAX("{column}"), 0) FROM "{table}"').fetchone()[0]
            last = max(int(top), int(counters.get(f"{table}.{column}") or 0))
            seq = conn.execute("SELECT pg_get_serial_sequence(?, ?)", (f'"{table}"', column)).fetchone()[0]
            if last > 0:
                conn.execute("SELECT setval(CAST(? AS regclass), ?, true)", (seq, last))
        return
    for key, value in counters.items():
        table = str(key).split(".", 1)[0]
        has = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = ?", (table,)).fetchone()
        if has is None:
            if conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (table,)).fetchone():
                conn.execute("INSERT INTO sqlite_sequence(name, seq) VALUES (?, ?)", (table, int(value)))
        elif int(has[0]) < int(value):
            conn.execute("UPDATE sqlite_sequence SET seq = ? WHERE name = ?", (int(value), table))


def sources(conn: Conn) -> list[tuple[str, str, str, str]]:
    """``(id, name, url, branch)`` of every source (the clones a backup bundles)."""
    return [
        (str(r[0]), str(r[1]), str(r[2]), str(r[3]))
        for r in conn.execute("SELECT id, name, url, branch FROM sources ORDER BY name")
    ]


def create_sqlite(path: Path, applied: list[str]) -> None:
    """A new SQLite catalog file at ``path`` with the schema of exactly the migrations ``applied``
    (the archive's): its rows fit it, and the workspace's next open runs the newer migrations on
    them, as on any older catalog."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("BEGIN")
        conn.execute(
            "CREATE TABLE IF NOT EXISTS migrations (name TEXT PRIMARY KEY, applied_at REAL NOT NULL)"
        )
        for fn in MIGRATIONS:
            if fn.__name__ in applied:
                fn(conn)
        conn.execute("COMMIT")
    finally:
        conn.close()


def load_sqlite(path: Path, files: Path, catalog: dict[str, Any]) -> dict[str, int]:
    """``import_rows`` into the new SQLite catalog file at ``path`` (one transaction)."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        try:
            got = import_rows(conn, files, catalog)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        return got
    finally:
        conn.close()


def migrations_applied(conn: Conn) -> list[str]:
    return [str(r[0]) for r in conn.execute("SELECT name FROM migrations ORDER BY name")]


def archived_sources(files: Path) -> list[tuple[str, str, str, str]]:
    """``(id, name, url, branch)`` of every source in the export at ``files`` (read before the rows
    go anywhere: the clones are placed first)."""
    path = files / TABLES_DIR / "sources.jsonl"
    if not path.is_file():
        raise ValidationFailed("the archive has no rows file for table sources")
    with open(path, encoding="utf-8") as f:
        cols = json.loads(f.readline() or "null")
        if not isinstance(cols, list) or not {"id", "name", "url", "branch"} <= set(cols):
            raise ValidationFailed("the archive's rows file for sources has no column header")
        rows = [dict(zip(cols, json.loads(line), strict=False)) for line in f]
    return [(str(r["id"]), str(r["name"]), str(r["url"]), str(r["branch"])) for r in rows]


def forward_sqlite(path: Path, into: Path, counters: dict[str, Any]) -> dict[str, Any]:
    """The SQLite catalog file at ``path`` (an archive's, maybe at an older schema) migrated to this
    gitkb's schema there, then exported under ``into`` (``export``): the manifest entry a
    ``table-rows`` import into PostgreSQL loads. The migrations are one sequence for both engines, so
    the rows come forward as they would have in the older gitkb's own catalog; ``counters`` (the
    archive's identity counters) are kept where they are past the file's own."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute("BEGIN IMMEDIATE")
        try:
            migrate(conn)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        conn.execute("BEGIN")
        try:
            entry = export(conn, into)
        finally:
            conn.execute("COMMIT")
    finally:
        conn.close()
    merged = dict(entry["counters"])
    for key, value in counters.items():
        merged[str(key)] = max(int(value or 0), merged.get(str(key), 0))
    return {"backend": "sqlite", "format": TABLE_ROWS, "dir": TABLES_DIR, **entry, "counters": merged}


def forward_archive(cat: dict[str, Any], files: Path, sqlite_file: Path, into: Path) -> dict[str, Any]:
    """An archive's catalog (manifest entry ``cat``, unpacked at ``files``) at this gitkb's schema,
    exported under ``into``: a SQLite catalog at the archive's schema -- its own file
    (``sqlite_file``), or a ``table-rows`` export loaded into a new one -- migrated forward."""
    path = sqlite_file
    if cat.get("format") == TABLE_ROWS:
        path = files / "forward.sqlite3"
        create_sqlite(path, list(cat.get("migrations") or []))
        load_sqlite(path, files, cat)
    return forward_sqlite(path, into, dict(cat.get("counters") or {}))
