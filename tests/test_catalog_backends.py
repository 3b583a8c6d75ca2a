"""The catalog on SQLite and on PostgreSQL: one schema, one migration sequence, how a catalog URL is
chosen, the job queue's claim under concurrency, and what status and /readyz say about the backend."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from gitkb import Workspace
from gitkb.core.config import load_settings
from gitkb.core.errors import InvalidArgument
from gitkb.stores import backup_archive
from gitkb.stores.catalog import Catalog, jobs, open_catalog, table_rows
from gitkb.stores.catalog.engine import glob_to_regex, redact_url
from gitkb.stores.catalog.migrations import IMPLICIT_ROWID, MIGRATIONS, migrate
from helpers import ok, postgres


def _sqlite_schema(path: Path) -> dict[str, set[str]]:
    Catalog(path).close()
    conn = sqlite3.connect(path)
    tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
    out = {
        t: {r[1] for r in conn.execute(f"PRAGMA table_info({t})")} for t in tables if t != "sqlite_sequence"
    }
    conn.close()
    return out


def test_both_engines_have_the_same_tables_and_columns(tmp_path: Path) -> None:
    url = postgres.create_database()
    try:
        catalog = open_catalog(url, tmp_path / "unused.sqlite3")
        rows = catalog.conn.execute(
            "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = 'public'"
        ).fetchall()
        applied = {r[0] for r in catalog.conn.execute("SELECT name FROM migrations").fetchall()}
        catalog.close()
    finally:
        postgres.drop_database(url)
    pg: dict[str, set[str]] = {}
    for table, column in rows:
        pg.setdefault(table, set()).add(column)
    lite = _sqlite_schema(tmp_path / "c.sqlite3")
    for table in IMPLICIT_ROWID:  # SQLite's implicit rowid, spelled out on PostgreSQL
        lite[table] = lite[table] | {"rowid"}
    assert pg == lite
    assert applied == {fn.__name__ for fn in MIGRATIONS}  # one migration sequence, both engines


def test_two_connections_claiming_at_once_never_get_the_same_job() -> None:
    """Each claimer holds its transaction open a moment after claiming, outside the catalog's
    write lock: only ``FOR UPDATE SKIP LOCKED`` keeps them off each other's job. (PostgreSQL only:
    SQLite serialises writers with BEGIN IMMEDIATE, so no two claims ever overlap there.)"""
    from gitkb.stores.catalog.postgres import PgCatalog, PgConnection

    url = postgres.create_database()
    catalog = PgCatalog(url)
    try:
        with catalog.write() as conn:
            queued = {jobs.insert(conn, "noop", {"n": i}).id for i in range(12)}
        claimed: dict[str, list[str]] = {"a": [], "b": []}
        start = threading.Barrier(2)

        def claimer(name: str) -> None:
            start.wait()
            while True:
                with catalog.pool.connection() as raw:
                    conn = PgConnection(raw)
                    raw.execute("BEGIN")
                    job = jobs.claim_next(conn, name)
                    time.sleep(0.05)  # the other claimer runs meanwhile
                    raw.execute("COMMIT")
                if job is None:
                    return
                claimed[name].append(job.id)

        threads = [threading.Thread(target=claimer, args=(n,)) for n in claimed]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        both = claimed["a"] + claimed["b"]
        assert sorted(both) == sorted(queued)  # every job once, none twice
        assert claimed["a"] and claimed["b"]  # they did run at the same time
        runners = {r[0]: r[1] for r in catalog.conn.execute("SELECT id, runner FROM jobs").fetchall()}
        assert all(runners[j] == n for n, ids in claimed.items() for j in ids)
    finally:
        catalog.close()
        postgres.drop_database(url)


def test_the_catalog_url_comes_from_gitkb_toml_the_environment_or_the_keyword(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gitkb import Workspace

    home = tmp_path / "h"
    home.mkdir()
    elsewhere = tmp_path / "shared" / "cat.sqlite3"
    elsewhere.parent.mkdir()
    assert load_settings(home).catalog_url is None
    (home / "gitkb.toml").write_text(f'[catalog]\nurl = "sqlite:///{elsewhere}"\n')
    assert load_settings(home).catalog_url == f"sqlite:///{elsewhere}"
    monkeypatch.setenv("GITKB_CATALOG_URL", "postgresql://u@db.invalid/kb")
    assert load_settings(home).catalog_url == "postgresql://u@db.invalid/kb"  # the environment wins
    monkeypatch.delenv("GITKB_CATALOG_URL")
    (home / "gitkb.toml").unlink()
    with Workspace(home, catalog_url=f"sqlite:///{elsewhere}", embedding_provider="hashing") as ws:
        assert ws.get_index_status()["catalog"] == {"engine": "sqlite", "path": str(elsewhere)}
    assert elsewhere.exists() and not (home / "catalog.sqlite3").exists()
    with pytest.raises(InvalidArgument, match="four slashes"):
        open_catalog("sqlite://relative.db", tmp_path / "x.sqlite3")
    with pytest.raises(InvalidArgument, match="unknown scheme"):
        open_catalog("mysql://x/y", tmp_path / "x.sqlite3")


def test_status_and_readyz_say_which_backend_never_the_password(
    catalog_backend: str, catalog_url: str | None, make_ws: Any, make_client: Any, home: Path
) -> None:
    given = catalog_url
    if catalog_url is not None:  # the test server trusts any password: give one, it must not show
        given = catalog_url.replace("postgresql://postgres@", "postgresql://postgres:s3cret-pw@")
        assert "s3cret-pw" in given
    ws = make_ws(catalog_url=given)
    status = ws.get_index_status()
    assert status["catalog"]["engine"] == catalog_backend
    assert "s3cret-pw" not in repr(status)
    if catalog_url is not None:
        assert status["catalog"]["url"] == redact_url(str(given)) and "***" in status["catalog"]["url"]
    ws.close()
    ready = make_client().get("/readyz").json()
    assert ready["checks"]["catalog"] == "ok" and ready["catalog_engine"] == catalog_backend


@pytest.mark.parametrize(
    ("pattern", "yes", "no"),
    [
        ("docs/*.md", ["docs/a.md", "docs/x/y.md"], ["a/docs/a.md", "docs/a.mdx"]),
        ("a?c", ["abc", "a.c"], ["ac", "abbc"]),
        ("[ab]*", ["a1", "b"], ["c", "A"]),
        ("[^ab]*", ["c1"], ["a1"]),
        ("x.y+z", ["x.y+z"], ["xxy+z", "x.yyz"]),
    ],
)
def test_glob_means_the_same_on_both_engines(pattern: str, yes: list[str], no: list[str]) -> None:
    import re

    lite = sqlite3.connect(":memory:")
    for s in yes + no:
        want = s in yes
        assert bool(lite.execute("SELECT ? GLOB ?", (s, pattern)).fetchone()[0]) is want
        assert bool(re.search(glob_to_regex(pattern), s)) is want


def test_redact_url_hides_only_the_password() -> None:
    assert redact_url("postgresql://kb:pw@db:5432/gitkb") == "postgresql://kb:***@db:5432/gitkb"
    assert redact_url("postgresql://kb@db/gitkb") == "postgresql://kb@db/gitkb"
    assert (
        redact_url("postgresql://db/gitkb?user=kb&password=pw")
        == "postgresql://db/gitkb?user=kb&password=***"
    )


def test_gitkb_status_json_says_which_backend(
    catalog_backend: str, catalog_url: str | None, make_ws: Any, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CLI reads GITKB_CATALOG_URL (set by the fixture on PostgreSQL) at its entry point, and
    finds a workspace whose catalog is on PostgreSQL (no catalog.sqlite3 in its home)."""
    import json

    make_ws().close()
    assert (home / "catalog.sqlite3").exists() is (catalog_url is None)

    from click.testing import CliRunner

    from gitkb.cli.main import cli

    monkeypatch.setenv("GITKB_EMBEDDING_PROVIDER", "hashing")
    r = CliRunner().invoke(cli, ["--home", str(home), "--json", "status"])
    assert r.exit_code == 0, r.output
    got = json.loads(r.output)["catalog"]
    assert got["engine"] == catalog_backend
    assert got == (
        {"engine": "sqlite", "path": str(home / "catalog.sqlite3")} if catalog_url is None else got
    )
    human = CliRunner().invoke(cli, ["--home", str(home), "status"])
    assert f"catalog:           {catalog_backend}" in human.output


def test_an_autocommit_write_waits_for_the_write_transaction_so_seqs_commit_in_order() -> None:
    """On PostgreSQL a write through ``catalog.conn`` takes the write lock as SQLite's would: a
    change-log entry given a later seq never commits before an earlier one (a watermark would skip it)."""
    from gitkb.stores.catalog import vector_state
    from gitkb.stores.catalog.postgres import PgCatalog

    url = postgres.create_database()
    catalog = PgCatalog(url)
    try:
        done: list[tuple[str, float]] = []
        holding = threading.Event()

        def writer() -> None:
            with catalog.write() as conn:
                vector_state.log_reembed(conn, "ix")
                holding.set()
                time.sleep(0.5)
                # stamped before the commit releases the lock: after it, the waiting autocommit and
                # this thread race to append (under load the autocommit sometimes won that race)
                done.append(("transaction", time.monotonic()))

        t = threading.Thread(target=writer)
        t.start()
        assert holding.wait(10)
        vector_state.log_reembed(catalog.conn, "ix")  # autocommit, another connection
        done.append(("autocommit", time.monotonic()))
        t.join(10)
        assert [what for what, _ in sorted(done, key=lambda d: d[1])] == ["transaction", "autocommit"]
        seqs = [r[0] for r in catalog.conn.execute("SELECT seq FROM changes ORDER BY seq").fetchall()]
        assert len(seqs) == 2 and seqs[0] < seqs[1]
    finally:
        catalog.close()
        postgres.drop_database(url)


def test_gitkb_backup_of_a_postgresql_catalog_is_a_table_rows_export_that_round_trips_types(
    catalog_backend: str, make_ws: Any, tmp_path: Path
) -> None:
    """pgbackup19: no pg_dump. The export holds every table in migration order, keeps floats, NULL
    and JSON text as they were, restores into SQLite with its counters past the ids, and a restore
    into a database that holds gitkb rows (the source's own) is refused with nothing written."""
    ws = make_ws()
    ok(ws.document_index("CREATE_INDEX", index_name="notes", embeddings=False))
    ok(ws.document_index("ADD_TEXT", index_name="notes", text="# a\n\nsome text\n", filepath="a.md"))
    archive = tmp_path / "kb.tar"
    out = ws.backup(str(archive))
    assert out["Success"], out
    manifest = backup_archive.read(archive, tmp_path / "files")
    if catalog_backend == "sqlite":
        assert manifest["catalog"]["format"] == "sqlite-database"
        if postgres.SERVER_URL is None:
            return
        url = postgres.create_database()  # fence18: a SQLite archive restores into PostgreSQL too
        try:
            ok(ws.restore(str(archive), str(tmp_path / "r"), catalog_url=url))
            with Workspace(tmp_path / "r", catalog_url=url) as r:
                assert r.ctx.catalog.backend["engine"] == "postgresql"
                assert ok(r.document_index("LIST_DOCUMENTS", index_name="notes"))["total_count"] == 1
        finally:
            postgres.drop_database(url)
        return
    cat = manifest["catalog"]
    assert cat["format"] == "table-rows" and cat["backend"] == "postgresql", cat
    assert cat["migrations"] == sorted(fn.__name__ for fn in MIGRATIONS)
    assert cat["order"] == table_rows.table_order() and set(cat["tables"]) == set(cat["order"])
    assert cat["tables"]["documents"] == 1 and cat["tables"]["chunks"] >= 1
    with ws.ctx.catalog.read() as conn:
        doc = conn.execute("SELECT * FROM documents").fetchone()
        cols = list(doc.keys())
    lines = (tmp_path / "files" / "catalog" / "tables" / "documents.jsonl").read_text().splitlines()
    assert json.loads(lines[0]) == cols and len(lines) == 2
    row = dict(zip(cols, json.loads(lines[1]), strict=True))
    assert row == {k: doc[k] for k in cols}
    assert isinstance(row["created_at"], float) and row["expires_at"] is None
    assert isinstance(row["metadata"], str) and isinstance(json.loads(row["metadata"]), dict)

    sqlite_home = tmp_path / "one-machine"
    got = ok(ws.restore(str(archive), str(sqlite_home)))
    assert got["tables"] == cat["tables"] and got["differences"] == [], got
    restored = sqlite3.connect(sqlite_home / "catalog.sqlite3")
    try:
        back = restored.execute(f"SELECT {', '.join(cols)} FROM documents").fetchone()
        assert list(back) == [doc[k] for k in cols]
        seq = restored.execute("SELECT seq FROM sqlite_sequence WHERE name = 'documents'").fetchone()
        assert seq is not None and seq[0] >= doc["rowid"]
    finally:
        restored.close()

    target = postgres.create_database()
    try:
        got = ok(ws.restore(str(archive), str(tmp_path / "pg-home"), catalog_url=target))
        assert got["tables"] == cat["tables"] and got["differences"] == [], got
        with Workspace(tmp_path / "pg-home", catalog_url=target, embedding_provider="hashing") as r:
            ok(r.document_index("ADD_TEXT", index_name="notes", text="# b\n\nmore\n", filepath="b.md"))
            with r.ctx.catalog.read() as conn:  # the identity counters went past the restored ids
                rowids = [x[0] for x in conn.execute("SELECT rowid FROM documents ORDER BY rowid").fetchall()]
        assert len(rowids) == 2 and rowids[0] == doc["rowid"] and rowids[1] > rowids[0]
    finally:
        postgres.drop_database(target)

    refused = ws.restore(str(archive), str(tmp_path / "busy"), catalog_url=ws.settings.catalog_url)
    assert refused["code"] == "validation" and "already holds gitkb rows" in refused["Error"], refused
    assert not (tmp_path / "busy").exists()
    with ws.ctx.catalog.read() as conn:  # the source's rows are as they were
        assert conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0] == 1


def test_table_rows_values_keep_their_types() -> None:
    for value in (b"\x00\xff raw", 0.1 + 0.2, 1e300, -0.0, 7, None, '{"a": [1, 2.5]}', "tekst ü"):
        line = json.dumps([table_rows.encode_value(value)])
        (back,) = [table_rows.decode_value(v) for v in json.loads(line)]
        assert back == value and type(back) is type(value), (value, back)


def test_a_postgresql_catalog_with_a_table_no_migration_makes_is_not_half_backed_up(
    catalog_backend: str, make_ws: Any, tmp_path: Path
) -> None:
    """pgbackup19: a table this gitkb does not know (a newer gitkb's) would be left out of the
    export: the backup is refused instead, and no file is written."""
    if catalog_backend == "sqlite":
        pytest.skip("SQLite is copied whole, page by page")
    ws = make_ws()
    ws.ctx.catalog.conn.execute("CREATE TABLE newer_things (id TEXT PRIMARY KEY)")
    out = ws.backup(str(tmp_path / "kb.tar"))
    assert out["code"] == "validation" and "newer_things" in out["Error"], out
    assert not (tmp_path / "kb.tar").exists() and not list(tmp_path.glob(".kb.tar.*"))


def _redundant(indexes: dict[str, tuple[str, ...]]) -> list[str]:
    """Indexes whose columns are a leading part of another index's: every lookup they serve, the
    longer one serves too, and each INSERT pays for both."""
    return sorted(
        name
        for name, cols in indexes.items()
        for other, longer in indexes.items()
        if other != name and len(longer) > len(cols) and longer[: len(cols)] == cols
    )


def test_chunks_has_no_index_that_another_makes_redundant_on_either_engine(tmp_path: Path) -> None:
    """``chunks_index(index_id)`` duplicated the index of ``UNIQUE (index_id, id)`` (issue 20):
    migration m024_ingest20_drop_chunks_index drops it on both engines."""
    Catalog(tmp_path / "c.sqlite3").close()
    conn = sqlite3.connect(tmp_path / "c.sqlite3")
    lite = {
        name: tuple(r[2] for r in conn.execute(f"PRAGMA index_info('{name}')"))
        for (name,) in conn.execute("SELECT name FROM pragma_index_list('chunks')").fetchall()
    }
    plan = " ".join(
        r[3] for r in conn.execute("EXPLAIN QUERY PLAN SELECT id FROM chunks WHERE index_id = 'x'")
    )
    conn.close()
    assert "sqlite_autoindex_chunks" in plan  # lookups by index still use an index
    assert _redundant(lite) == []
    url = postgres.create_database()
    try:
        catalog = open_catalog(url, tmp_path / "unused.sqlite3")
        rows = catalog.conn.execute(
            "SELECT i.relname, a.attname, k.n FROM pg_index x"
            " JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid"
            " CROSS JOIN LATERAL unnest(x.indkey) WITH ORDINALITY AS k(attnum, n)"
            " JOIN pg_attribute a ON a.attrelid = t.oid AND a.attnum = k.attnum"
            " WHERE t.relname = 'chunks' ORDER BY i.relname, k.n"
        ).fetchall()
        catalog.close()
    finally:
        postgres.drop_database(url)
    pg: dict[str, tuple[str, ...]] = {}
    for name, column, _n in rows:
        pg[name] = (*pg.get(name, ()), column)
    assert "chunks_index_id_id_key" in pg or any(cols == ("index_id", "id") for cols in pg.values())
    assert _redundant(pg) == []


def test_no_index_keys_chunks_by_content_hash_on_either_engine(tmp_path: Path) -> None:
    """No query looks a chunk up by its content hash, so ``chunks_hash`` only cost every chunk INSERT
    a random 64-char key (issue 20): migration m026_ingest20c_drop_chunks_hash drops it, also from a
    catalog made before it, on both engines."""
    old = tmp_path / "old.sqlite3"
    conn = sqlite3.connect(old)
    migrate(conn, upto="m025_chroma18_workspace_id")
    assert "chunks_hash" in {r[1] for r in conn.execute("PRAGMA index_list('chunks')")}
    migrate(conn)
    for c in (conn, sqlite3.connect(tmp_path / "new.sqlite3")):
        if c is not conn:
            Catalog(tmp_path / "new.sqlite3").close()
        cols = {
            name: tuple(r[2] for r in c.execute(f"PRAGMA index_info('{name}')"))
            for (name,) in c.execute("SELECT name FROM pragma_index_list('chunks')").fetchall()
        }
        assert cols and not any("content_hash" in v for v in cols.values()), cols
        c.close()


def test_no_index_keys_chunks_by_content_hash_on_postgresql(tmp_path: Path) -> None:
    """The same on PostgreSQL (m026_ingest20c_drop_chunks_hash)."""
    url = postgres.create_database()
    try:
        catalog = open_catalog(url, tmp_path / "unused.sqlite3")
        defs = [
            r[0] for r in catalog.conn.execute("SELECT indexdef FROM pg_indexes WHERE tablename = 'chunks'")
        ]
        catalog.close()
    finally:
        postgres.drop_database(url)
    assert defs and not any("content_hash" in d for d in defs), defs


def test_search_hits_read_by_position_are_the_rows_read_by_name(ws: Any, tmp_path: Path) -> None:
    """``chunks_by_cids`` (full rows, read by position) gives the chunk and document rows the by-name
    readers give: heading paths, metadata, chunk settings, tenant, tier and expiry too; and
    ``cited_chunks`` (what a search's citations show) the same values of those rows."""
    from gitkb.stores.catalog.documents import chunks_by_cids, cited_chunks, get_by_path
    from gitkb.stores.catalog.documents.rows import CHUNK_COLUMNS, chunk_from_row

    ok(ws.document_index("CREATE_INDEX", index_name="kb", embeddings=False))
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("# Top\n\nintro words\n\n## Part two\n\n" + "more words. " * 90)
    ok(ws.document_index("ADD_DOCUMENTS", index_name="kb", filepath=str(tmp_path / "docs")))
    ok(
        ws.document_index(
            "ADD_TEXT", index_name="kb", text="a note", filepath="n.md", metadata={"k": [1, "é"]}
        )
    )
    ok(
        ws.document_index(
            "ADD_TEXT",
            index_name="kb",
            text="plain text, no headings",
            filepath="b.txt",
            tenant="t1",
            tier="hot",
            ttl_seconds=3600,
            chunk_size=64,
            chunk_overlap=8,
        )
    )
    conn = ws.ctx.catalog.conn
    cids = [int(r[0]) for r in conn.execute("SELECT rowid FROM chunks ORDER BY rowid")]
    got = chunks_by_cids(conn, [*cids, 10**9])
    assert sorted(got) == cids and len(cids) > 2
    for cid in cids:
        chunk, doc = got[cid]
        by_name = conn.execute(f"SELECT {CHUNK_COLUMNS} FROM chunks WHERE rowid = ?", (cid,)).fetchone()
        assert chunk == chunk_from_row(by_name)
        assert doc == get_by_path(conn, doc.index_id, doc.path)
    docs = {d.path: d for _, d in got.values()}
    assert docs["n.md"].metadata["k"] == [1, "é"] and docs["b.txt"].tenant == "t1"
    assert docs["b.txt"].chunk_config is not None and docs["b.txt"].expires_at is not None
    assert any(c.heading_path for c, _ in got.values())
    cited = cited_chunks(conn, [*cids, 10**9])  # what a citation shows: the same values
    assert sorted(cited) == cids
    for cid, (chunk, doc) in got.items():
        c = cited[cid]
        assert (c.cid, c.id, c.index_id, c.text, c.heading_path) == (
            chunk.cid,
            chunk.id,
            chunk.index_id,
            chunk.text,
            chunk.heading_path,
        )
        assert (c.char_start, c.char_end, c.line_start, c.line_end) == (
            chunk.char_start,
            chunk.char_end,
            chunk.line_start,
            chunk.line_end,
        )
        assert (c.document_id, c.path, c.title, c.source_uri) == (doc.id, doc.path, doc.title, doc.source_uri)
