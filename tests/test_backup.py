"""gitkb backup FILE / gitkb restore FILE DIR: an archive taken while another process holds the
writer, restored into a new directory with the same answers (top-10 ids of 20 queries, keyword and
hybrid), the pending review and its diff (approving it after the restore pushes that diff to the
bare remote), audit and webhook deliveries; a damaged archive and a non-empty target are refused
with nothing written; agents and read tokens cannot call either. Real SQLite, tantivy, embedded
Chroma (hashing embedder), real clones of a bare remote, the CLI in a subprocess."""

from __future__ import annotations

import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import tarfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

from cli_tty import no_tty, on_tty
from gitkb import Workspace
from gitkb.cli.main import cli
from gitkb.core import action_table as table
from gitkb.services.access import principals
from gitkb.stores import backup_archive
from gitkb.stores.catalog import deliveries
from helpers import SOURCE, Upstream, git, ok, wait_until
from helpers.http_shape import error_code

BRANCH = "gitkb/proposals/handbook"
CHROMA = Path(__file__).resolve().parents[1] / ".venv" / "bin" / "chroma"
ROTATE = "runbooks/rotate-api-keys.md"
TOPICS = [
    "database failover",
    "password rotation",
    "incident response",
    "data retention",
    "onboarding laptop",
    "api keys",
    "backup schedule",
    "network outage",
    "disk space alert",
    "certificate renewal",
    "access review",
    "vendor contract",
    "release checklist",
    "on call handover",
    "log retention",
    "encryption at rest",
    "postmortem template",
    "capacity planning",
    "dns change",
    "cost report",
]
QUERIES = [*TOPICS]
WORDS = "amber birch cedar delta ember fjord garnet harbor iris juniper kestrel lagoon maple".split()


def gitkb(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The CLI in its own process, as an operator runs it next to a server."""
    return subprocess.run(
        [sys.executable, "-c", "from gitkb.cli.main import main; main()", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ},
        timeout=300,
    )


def fill(w: Any) -> None:
    ok(w.document_index("CREATE_INDEX", index_name="notes"))
    for i in range(60):  # distinct texts: no two notes tie on a score (ties would cut at random)
        a, b = TOPICS[i % len(TOPICS)], TOPICS[(i * 7 + 3 + i // 20) % len(TOPICS)]
        team, site = WORDS[i % len(WORDS)], WORDS[(i * 3 + 1) % len(WORDS)]
        text = f"# Note on {a}\n\nSteps for {a} when {b} happens, by the {team} team at the {site} site.\n"
        ok(w.document_index("ADD_TEXT", index_name="notes", text=text, filepath=f"note-{i}.md"))
    ok(w.build_embeddings())


def top10(w: Any, mode: str) -> list[list[tuple[float, Any]]]:
    """Each query's top 10 as runs of equal scores: the ids of each run (their order among
    themselves is the vector store's, by insertion), and of the run the 10th place cuts, how many.
    The restore re-inserts the vectors in another order; equal scores are all it may change."""
    out = []
    for q in QUERIES:
        got = ok(w.document_index("SEARCH", query=q, mode=mode, top_n=10))
        runs: list[tuple[float, set[str]]] = []
        for r in got["Results"]:
            score = round(float(r["score"]), 6)
            if runs and runs[-1][0] == score:
                runs[-1][1].add(str(r["id"]))
            else:
                runs.append((score, {str(r["id"])}))
        cut = [(s, frozenset(ids)) for s, ids in runs[:-1]]
        out.append([*cut, (runs[-1][0], len(runs[-1][1]))] if runs else [])
    return out


def restored_at(path: Path, catalog_url: str | None = None) -> Any:
    """The restored workspace on its own catalog (never the source's, which GITKB_CATALOG_URL names
    in the PostgreSQL half)."""
    return Workspace(path, catalog_url=catalog_url or f"sqlite:///{path / 'catalog.sqlite3'}")


def test_backup_while_another_process_writes_then_restore_brings_everything_back(
    source_ws: Any,
    upstream: Upstream,
    tmp_path: Path,
    home: Path,
    catalog_backend: str,
    catalog_for: Callable[[Path], str | None],
) -> None:
    """On SQLite: the file copy restored into SQLite. On PostgreSQL: the table-rows export restored
    into another (empty) PostgreSQL database, and into SQLite (one machine)."""
    ws = source_ws  # this process holds the writer lease, as a running `gitkb serve` does
    assert ws.ctx.is_writer
    fill(ws)
    ok(ws.propose_kb_edit(SOURCE, ROTATE, search="every 90 days", replace="every 60 days"))
    pr = ok(ws.open_kb_pull_request(SOURCE))
    review_before = ok(ws.show_review(pr["review_id"]))
    with ws.ctx.catalog.write() as w:
        source_id = ok(ws.source_list())["Sources"][0]["source_id"]
        deliveries.claim(w, "github", "delivery-1", source_id=source_id, commit=None, event="push")
        deliveries.set_secret(w, source_id, "whsec-kept-in-the-catalog")
    keyword, hybrid = top10(ws, "keyword"), top10(ws, "hybrid")
    assert all(keyword[:5]) and all(hybrid)
    ok(ws.checkout(SOURCE, str(tmp_path / "checkout")))
    audit_before = ok(ws.list_audit(count=500))["Entries"]

    archive = tmp_path / "kb.backup"
    made = gitkb("--home", str(home), "--json", "backup", str(archive))
    assert made.returncode == 0, made.stderr
    held = json.loads(made.stdout)
    assert held["sha256"] and (tmp_path / "kb.backup.sha256").read_text().split()[0] == held["sha256"]
    assert held["tables"]["reviews"] == 1 and held["tables"]["chunks"] >= 60
    assert held["tables"]["webhook_deliveries"] == 1 and held["tables"]["audit"] == len(audit_before)
    assert held["proposal_branches"] == [BRANCH]
    assert [s["name"] for s in held["sources"]] == [SOURCE]
    assert oct(archive.stat().st_mode & 0o777) == "0o600"
    with tarfile.open(archive) as tar:
        names = tar.getnames()
    member = "catalog/catalog.sqlite3" if catalog_backend == "sqlite" else "catalog/tables/reviews.jsonl"
    assert names[0] == "manifest.json" and member in names, names
    assert not any(n.startswith(("keywords", "vectors")) for n in names)  # derived: rebuilt
    human = gitkb("--home", str(home), "backup", str(tmp_path / "again.backup"))
    assert human.returncode == 0 and "sha256" in human.stdout and "reviews" in human.stdout, human

    targets: list[tuple[Path, str | None]] = [(tmp_path / "restored", None)]
    if catalog_backend == "postgresql":  # into another PostgreSQL database too (approved there)
        targets.append((tmp_path / "restored-pg", catalog_for(tmp_path / "restored-pg")))
    for restored, url in targets:
        back = gitkb(
            "--json", "restore", str(archive), str(restored), *(["--catalog-url", url] if url else [])
        )
        assert back.returncode == 0, back.stderr
        ws.close()  # restored while the source ran; now only one workspace in this process
        got = json.loads(back.stdout)
        assert got["differences"] == [] and got["tables"] == held["tables"], got
        assert got["embeddings"]["chunks_embedded"] > 0  # a new embedded store: the vectors were embedded
        assert str(tmp_path / "checkout") in " ".join(got["Warnings"])  # followed by both: said so
        with restored_at(restored, url) as r:
            assert r.ctx.catalog.backend["engine"] == ("postgresql" if url else "sqlite")
            assert top10(r, "keyword") == keyword
            assert top10(r, "hybrid") == hybrid
            assert ok(r.list_audit(count=500))["Entries"][: len(audit_before)] == audit_before
            with r.ctx.catalog.read() as conn:
                assert deliveries.get(conn, "github", "delivery-1") is not None
                assert deliveries.get_secret(conn, source_id) == "whsec-kept-in-the-catalog"
            review = ok(r.show_review(pr["review_id"]))
            assert review["review_state"] == "pending" and review["diff"] == review_before["diff"]
            assert upstream.remote_sha(BRANCH) is None
            if (restored, url) == targets[-1]:
                ok(r.approve_review(pr["review_id"]))
    pushed = git(upstream.remote, "diff", "main", BRANCH)
    assert changed_lines(pushed) == changed_lines(review_before["diff"]) != []
    assert "every 60 days" in upstream.read_remote(BRANCH, f"docs/{ROTATE}")


def changed_lines(diff: str) -> list[str]:
    return [line for line in diff.splitlines() if line[:1] in "+-" and not line.startswith(("+++", "---"))]


def test_restore_refuses_a_damaged_archive_and_a_non_empty_directory(
    make_ws: Callable[..., Any], tmp_path: Path, home: Path
) -> None:
    w = make_ws()
    ok(w.document_index("CREATE_INDEX", index_name="notes"))
    ok(w.document_index("ADD_TEXT", index_name="notes", text="# a\n\nsome text\n", filepath="a.md"))
    archive = tmp_path / "kb.backup"
    ok(w.backup(str(archive)))
    assert error_code(w.backup(str(archive))) == "conflict"  # never replaces a file
    w.close()
    runner = CliRunner()

    full = tmp_path / "full"
    full.mkdir()
    (full / "keep.txt").write_text("mine")
    refused = runner.invoke(cli, ["restore", str(archive), str(full)])
    assert refused.exit_code == 2 and "not empty" in refused.output, refused.output
    assert sorted(p.name for p in full.iterdir()) == ["keep.txt"]

    data = bytearray(archive.read_bytes())
    data[len(data) // 2] ^= 0xFF
    damaged = tmp_path / "damaged.backup"
    damaged.write_bytes(bytes(data))
    for sidecar in (False, True):
        if sidecar:
            (tmp_path / "damaged.backup.sha256").write_text((tmp_path / "kb.backup.sha256").read_text())
        target = tmp_path / f"out-{sidecar}"
        r = runner.invoke(cli, ["--json", "restore", str(damaged), str(target)])
        assert r.exit_code == 1, r.output
        body = json.loads(r.stdout)
        assert body["code"] == "validation" and "damaged" in body["Error"], body
        assert not target.exists()
        assert not [p for p in tmp_path.iterdir() if "restoring" in p.name]
    wrong = runner.invoke(cli, ["restore", str(archive), str(tmp_path / "x"), "--sha256", "0" * 64])
    assert wrong.exit_code == 1 and "sha256" in wrong.output and not (tmp_path / "x").exists()
    empty = tmp_path / "empty"
    empty.mkdir(mode=0o750)
    fine = runner.invoke(cli, ["restore", str(archive), str(empty), "--sha256", full_sha(archive)])
    assert fine.exit_code == 0, fine.output
    assert (empty / "catalog.sqlite3").is_file() and oct(empty.stat().st_mode & 0o777) == "0o750"


def full_sha(path: Path) -> str:
    return (path.parent / f"{path.name}.sha256").read_text().split()[0]


def test_backup_and_restore_are_refused_to_agents_and_read_tokens(ws: Any, tmp_path: Path) -> None:
    archive = tmp_path / "kb.backup"
    for who in (principals.agent("helper"), principals.token("ci", {"read"})):
        view = ws.as_principal(who)
        assert error_code(view.backup(str(archive))) == "forbidden"
        assert error_code(view.restore(str(archive), str(tmp_path / "r"))) == "forbidden"
    assert not archive.exists() and not (tmp_path / "r").exists()
    operate = ws.as_principal(principals.token("ops", {"operate"}))
    assert error_code(operate.backup(str(archive))) == "forbidden"  # the whole catalog: admin
    ok(ws.backup(str(archive)))
    ok(ws.restore(str(archive), str(tmp_path / "r")))
    assert (tmp_path / "r" / "catalog.sqlite3").is_file()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def chroma_server(tmp_path: Path) -> Iterator[tuple[str, int]]:
    """A Chroma server of this test's own (a shared one holds other tests' vectors in the same
    collections, which verify would report)."""
    if not CHROMA.exists():
        pytest.skip("no chroma CLI in .venv")
    port = _free_port()
    cmd = [str(CHROMA), "run", "--path", str(tmp_path / "chroma"), "--host", "127.0.0.1", "--port", str(port)]
    env = {**os.environ, "ANONYMIZED_TELEMETRY": "False"}
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)

    def up() -> bool:
        try:
            return httpx.get(f"http://127.0.0.1:{port}/api/v2/heartbeat", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_until(up, timeout=90, interval=0.3, what="the chroma server")
        yield "127.0.0.1", port
    finally:
        proc.terminate()
        proc.wait(20)


@pytest.mark.slow
def test_restore_keeps_the_vectors_a_chroma_server_still_holds(
    make_ws: Callable[..., Any], home: Path, tmp_path: Path, chroma_server: tuple[str, int]
) -> None:
    host, port = chroma_server
    home.mkdir()
    (home / "gitkb.toml").write_text(
        f'[embedding]\nprovider = "hashing"\nmodel = "hashing-384"\n[chroma]\nhost = "{host}"\nport = {port}\n'
    )
    w = make_ws()
    fill(w)
    hybrid = top10(w, "hybrid")
    chunks = ok(w.embeddings_status())["chunk_count"]
    archive = tmp_path / "kb.backup"
    ok(w.backup(str(archive)))
    w.close()

    got = CliRunner().invoke(cli, ["--json", "restore", str(archive), str(tmp_path / "restored")])
    assert got.exit_code == 0, got.output
    emb = json.loads(got.stdout)["embeddings"]
    assert emb["chunks_embedded"] == 0 and emb["chunks_had_vector"] == chunks > 0, emb
    assert json.loads(got.stdout)["differences"] == []
    with restored_at(tmp_path / "restored") as r:
        assert top10(r, "hybrid") == hybrid


def test_restore_shows_its_progress_on_a_terminal(make_ws: Callable[..., Any], tmp_path: Path) -> None:
    w = make_ws()
    fill(w)
    archive = tmp_path / "kb.backup"
    ok(w.backup(str(archive)))
    w.close()
    ran = on_tty("restore", str(archive), str(tmp_path / "restored"))
    assert ran.code == 0, ran.tty
    assert "keywords" in ran.tty and "vectors" in ran.tty and "/60" in ran.tty, ran.tty
    assert "restored" in ran.stdout and "60 embedded" in ran.stdout, ran.stdout
    quiet = no_tty("--json", "restore", str(archive), str(tmp_path / "again"))
    assert quiet.code == 0 and "vectors" not in quiet.stderr and json.loads(quiet.stdout)["Success"]


def test_backup_while_the_writer_commits_is_one_consistent_snapshot(
    make_ws: Callable[..., Any], home: Path, tmp_path: Path
) -> None:
    w = make_ws()
    ok(w.document_index("CREATE_INDEX", index_name="notes", embeddings=False))
    stop = threading.Event()
    written: list[int] = []

    def write() -> None:
        i = 0
        while not stop.is_set():
            ok(
                w.document_index(
                    "ADD_TEXT", index_name="notes", text=f"# n{i}\n\nbody {i}\n", filepath=f"n{i}.md"
                )
            )
            written.append(i)
            i += 1

    writer = threading.Thread(target=write)
    writer.start()
    try:
        wait_until(lambda: len(written) >= 5, timeout=60, what="writes before the backup")
        made = gitkb("--home", str(home), "--json", "backup", str(tmp_path / "kb.backup"))
        during = len(written)
    finally:
        stop.set()
        writer.join(60)
    assert made.returncode == 0, made.stderr
    rows = json.loads(made.stdout)["tables"]
    assert 5 <= rows["documents"] <= during + 1 and rows["chunks"] == rows["documents"], rows
    back = CliRunner().invoke(cli, ["--json", "restore", str(tmp_path / "kb.backup"), str(tmp_path / "r")])
    assert back.exit_code == 0, back.output
    assert json.loads(back.stdout)["differences"] == []
    with restored_at(tmp_path / "r") as r:
        # an ADD_TEXT running at the snapshot is in the catalog as a running job: the restored writer
        # runs it again (its document was not in the snapshot), as after a crash
        wait_until(
            lambda: not [j for j in ok(r.list_jobs())["Jobs"] if j["status"] in ("queued", "running")],
            timeout=60,
            what="the restored writer's jobs",
        )
        docs = ok(r.document_index("LIST_DOCUMENTS", index_name="notes", count=50))
        assert rows["documents"] <= docs["total_count"] <= rows["documents"] + 1, docs
        assert ok(r.document_index("SEARCH", query="body", mode="keyword", top_n=5))["Results"]


def test_backup_and_restore_are_on_neither_http_nor_mcp() -> None:
    """Admin actions over files on the server's disk: the CLI and the library only."""
    from gitkb.core.config import load_settings
    from gitkb.http import create_app
    from gitkb.mcp import tools as mcp_tools

    app = create_app(load_settings("/nonexistent-gitkb-home"))
    paths = " ".join(getattr(r, "path", "") for r in app.routes)
    assert "backup" not in paths and "restore" not in paths
    assert table.ACTIONS["backup"].cls == table.ACTIONS["restore"].cls == "admin"
    assert not table.ACTIONS["backup"].agents and not table.ACTIONS["restore"].agents
    assert not {"backup", "restore"} & mcp_tools.TOOL_NAMES


def test_a_crafted_manifest_cannot_place_a_clone_outside_the_workspace(
    source_ws: Any, tmp_path: Path
) -> None:
    archive = tmp_path / "kb.backup"
    ok(source_ws.backup(str(archive)))
    files = tmp_path / "files"
    manifest = backup_archive.read(archive, files)
    (clone,) = manifest["clones"]
    evil = "../../../evil"  # from <out>/.r.restoring-*/home/repos/: <out>/evil
    (files / "clones" / f"{clone['source_id']}.bundle").rename(files / "clones" / "evil.bundle")
    manifest["clones"] = [{**clone, "source_id": evil, "file": "clones/evil.bundle"}]
    crafted = tmp_path / "crafted.backup"
    backup_archive.write(crafted, files, manifest)  # a well-formed archive, sha256s and all
    got = source_ws.restore(str(crafted), str(tmp_path / "out" / "r"))
    assert error_code(got) == "validation" and "no source in its catalog" in got["Error"], got
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
    assert not (tmp_path / "out" / "evil").exists()


def test_a_source_without_its_clone_is_said_and_cloned_again_on_restore(
    source_ws: Any, tmp_path: Path
) -> None:
    source_id = ok(source_ws.source_list())["Sources"][0]["source_id"]
    shutil.rmtree(source_ws.settings.repos_path / source_id)
    made = ok(source_ws.backup(str(tmp_path / "kb.backup")))
    assert "no managed clone to bundle for source handbook" in " ".join(made["Warnings"]), made
    got = ok(source_ws.restore(str(tmp_path / "kb.backup"), str(tmp_path / "r")))
    assert [d["kind"] for d in got["differences"]] == ["clone_missing"], got
    with restored_at(tmp_path / "r") as r:
        assert ok(r.verify(repair=True))["clean"] is True  # cloned again from the remote


def test_a_restored_gitkb_toml_that_names_the_old_catalog_is_said(
    make_ws: Callable[..., Any], home: Path, tmp_path: Path, catalog_url: str | None
) -> None:
    """pgbackup19: the archived gitkb.toml may say ``[catalog] url`` (the backed-up catalog); the
    restore opens the restored catalog all the same and says the file still names the old one."""
    old = catalog_url or f"sqlite:///{home / 'catalog.sqlite3'}"
    home.mkdir()
    (home / "gitkb.toml").write_text(f'[catalog]\nurl = "{old}"\n')
    w = make_ws()
    ok(w.document_index("CREATE_INDEX", index_name="notes", embeddings=False))
    ok(w.document_index("ADD_TEXT", index_name="notes", text="# a\n\nsome text\n", filepath="a.md"))
    ok(w.backup(str(tmp_path / "kb.backup")))
    got = ok(w.restore(str(tmp_path / "kb.backup"), str(tmp_path / "r")))
    assert "names [catalog] url" in " ".join(got.get("Warnings", [])), got
    assert got["differences"] == [] and got["keyword_chunks"] == 1, got
    with restored_at(tmp_path / "r") as r:
        assert ok(r.document_index("LIST_DOCUMENTS", index_name="notes"))["total_count"] == 1


def test_a_table_rows_archive_whose_rows_differ_from_its_manifest_is_refused(
    make_ws: Callable[..., Any],
    tmp_path: Path,
    catalog_backend: str,
    catalog_for: Callable[[Path], str | None],
) -> None:
    """pgbackup19: the row counts are checked on restore (into SQLite and into PostgreSQL), even in an
    archive whose checksums were made to match; nothing is written on either side."""
    if catalog_backend == "sqlite":
        pytest.skip("a SQLite archive holds the database file (checked by its integrity check and counts)")
    w = make_ws()
    ok(w.document_index("CREATE_INDEX", index_name="notes", embeddings=False))
    for i in range(3):
        ok(
            w.document_index(
                "ADD_TEXT", index_name="notes", text=f"# n{i}\n\nbody {i}\n", filepath=f"n{i}.md"
            )
        )
    archive = tmp_path / "kb.backup"
    ok(w.backup(str(archive)))
    files = tmp_path / "files"
    manifest = backup_archive.read(archive, files)
    rows = files / "catalog" / "tables" / "chunks.jsonl"
    rows.write_text("".join(rows.read_text().splitlines(keepends=True)[:-1]))  # one chunk row gone
    crafted = tmp_path / "crafted.backup"
    backup_archive.write(crafted, files, manifest)
    target = catalog_for(tmp_path / "into-pg")
    for directory, url in ((tmp_path / "into-sqlite", None), (tmp_path / "into-pg", target)):
        got = w.restore(str(crafted), str(directory), catalog_url=url)
        assert error_code(got) == "validation" and "table chunks holds 2 rows" in got["Error"], got
        assert not directory.exists()
    empty = Workspace(tmp_path / "check", catalog_url=target)
    try:
        with empty.ctx.catalog.read() as conn:
            assert conn.execute("SELECT COUNT(*) FROM documents").fetchone()[0] == 0
    finally:
        empty.close()


def test_a_restored_workspace_is_its_own_writer_at_once(make_ws: Callable[..., Any], tmp_path: Path) -> None:
    """The writer lease and node rows say which processes run a catalog now, not what it holds: a
    backup taken while this process is the writer must not hand the restored copy a lease row naming
    a live pid of this host (the restored workspace would wait until that row looked stale before it
    could write) nor the original's node rows."""
    w = make_ws()
    assert w.ctx.is_writer
    ok(w.document_index("CREATE_INDEX", index_name="notes", embeddings=False))
    ok(w.document_index("ADD_TEXT", index_name="notes", text="# a\n\nsome text\n", filepath="a.md"))
    ok(w.backup(str(tmp_path / "kb.backup")))
    got = ok(w.restore(str(tmp_path / "kb.backup"), str(tmp_path / "r")))
    assert got["tables"].get("writer_lease") == 0 and got["tables"].get("nodes") == 0, got["tables"]
    with restored_at(tmp_path / "r") as r:
        assert r.ctx.is_writer, "the restored workspace waits for the backed-up process's lease"
        ok(r.document_index("ADD_TEXT", index_name="notes", text="# b\n\nmore\n", filepath="b.md"))
        assert ok(r.document_index("LIST_DOCUMENTS", index_name="notes"))["total_count"] == 2


OLD_SCHEMA = "m021_retired_chunks"  # before checkouts, nodes18's lease/nodes/floor, proposal_specs, ingest20


def old_schema_copy(current: Path, dest: Path) -> None:
    """A SQLite catalog file at ``OLD_SCHEMA``, as a gitkb of that time made it (the migrations run up
    to that step only), holding the rows of the catalog file ``current`` in the tables that schema has
    (their columns are the same: the migrations since add tables and drop an index only)."""
    from gitkb.stores.catalog import table_rows  # only this test builds an older catalog
    from gitkb.stores.catalog.migrations import migrate

    conn = sqlite3.connect(dest, isolation_level=None)
    try:
        conn.execute("BEGIN")
        migrate(conn, upto=OLD_SCHEMA)
        conn.execute("COMMIT")
        tables = table_rows.table_order(table_rows.migrations_applied(conn))
        assert "proposal_specs" not in tables and "writer_lease" not in tables and "documents" in tables
        conn.execute("ATTACH DATABASE ? AS cur", (str(current),))
        conn.execute("BEGIN")
        for t in tables:
            if t != "migrations":
                cols = ", ".join(f'"{r[1]}"' for r in conn.execute(f'PRAGMA main.table_info("{t}")'))
                conn.execute(f'INSERT INTO main."{t}" ({cols}) SELECT {cols} FROM cur."{t}"')
        conn.execute("COMMIT")
        conn.execute("DETACH DATABASE cur")
    finally:
        conn.close()


def test_archives_of_an_older_schema_restore_into_postgresql_and_sqlite(
    make_ws: Callable[..., Any],
    tmp_path: Path,
    home: Path,
    catalog_backend: str,
    catalog_for: Callable[[Path], str | None],
) -> None:
    """fence18: an older gitkb's archive (its catalog at ``OLD_SCHEMA``), as a SQLite file and as a
    table-rows export, restores into PostgreSQL (its rows migrated forward through a SQLite catalog of
    the archive's schema) and into SQLite; the restored workspace is at this gitkb's schema, holds
    every row and takes new ones."""
    from gitkb.stores.catalog import backup as catalog_backup  # only this test writes archives by hand
    from gitkb.stores.catalog import table_rows
    from gitkb.stores.catalog.migrations import MIGRATIONS

    w = make_ws(catalog_url=f"sqlite:///{home / 'catalog.sqlite3'}")
    ok(w.document_index("CREATE_INDEX", index_name="notes", embeddings=False))
    for i in range(4):
        text = f"# Note {i}\n\nThe older schema keeps note {i} about {WORDS[i]}.\n"
        ok(w.document_index("ADD_TEXT", index_name="notes", text=text, filepath=f"n{i}.md"))
    ok(w.document_index("DELETE_DOCUMENT", index_name="notes", filepath="n3.md"))  # a counter past MAX
    ok(w.backup(str(tmp_path / "now.backup")))
    files = tmp_path / "files"
    manifest = backup_archive.read(tmp_path / "now.backup", files)
    old_file = files / "catalog" / "catalog.sqlite3"
    old_file.unlink()
    old_schema_copy(home / "catalog.sqlite3", old_file)
    applied = catalog_backup.migrations_applied(old_file)
    assert applied and len(applied) < len(MIGRATIONS)
    as_file = {**manifest, "catalog": {**manifest["catalog"], "migrations": applied}}
    as_file["catalog"]["tables"] = catalog_backup.table_counts(old_file)
    backup_archive.write(tmp_path / "old-file.backup", files, as_file)
    rows_dir = tmp_path / "rows"
    rows_dir.mkdir()
    with sqlite3.connect(old_file, isolation_level=None) as conn:  # what an older gitkb on PostgreSQL wrote
        conn.execute("BEGIN")
        exported = table_rows.export(conn, rows_dir)
        conn.execute("COMMIT")
    assert exported["migrations"] == applied and "proposal_specs" not in exported["tables"]
    as_rows = {
        **manifest,
        "catalog": {
            "backend": "postgresql",
            "format": catalog_backup.TABLE_ROWS,
            "dir": "catalog/tables",
            **exported,
        },
    }
    backup_archive.write(tmp_path / "old-rows.backup", rows_dir, as_rows)
    docs = ok(w.document_index("LIST_DOCUMENTS", index_name="notes"))["total_count"]
    assert docs == 3
    w.close()
    for kind in ("file", "rows"):
        targets: list[tuple[Path, str | None]] = [(tmp_path / f"{kind}-sqlite", None)]
        if catalog_backend == "postgresql":
            targets.append((tmp_path / f"{kind}-pg", catalog_for(tmp_path / f"{kind}-pg")))
        for restored, url in targets:
            got = w.restore(str(tmp_path / f"old-{kind}.backup"), str(restored), catalog_url=url)
            assert got.get("Success") is True, (kind, url, got)
            with restored_at(restored, url) as r:
                assert r.ctx.catalog.backend["engine"] == ("postgresql" if url else "sqlite")
                done = [str(row[0]) for row in r.ctx.catalog.conn.execute("SELECT name FROM migrations")]
                assert sorted(done) == sorted(fn.__name__ for fn in MIGRATIONS)  # brought forward
                assert ok(r.document_index("LIST_DOCUMENTS", index_name="notes"))["total_count"] == docs
                hits = ok(r.document_index("SEARCH", index_name="notes", query="cedar", mode="keyword"))
                assert [h["filepath"] for h in hits["Results"]] == ["n2.md"]
                assert r.ctx.is_writer  # the lease table the old schema lacked is there, and free
                ok(
                    r.document_index(
                        "ADD_TEXT", index_name="notes", text="# New\n\nafter restore\n", filepath="x.md"
                    )
                )
                assert ok(r.document_index("LIST_DOCUMENTS", index_name="notes"))["total_count"] == docs + 1
