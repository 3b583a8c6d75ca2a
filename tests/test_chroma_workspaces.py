"""Two workspaces on one Chroma server with the same embedding identity (part chroma18).

Collections are named with the workspace's id (``workspace_state.workspace_id``, made once by
``m025_chroma18_workspace_id``): two workspaces (two catalogs) never share one, so neither overwrites
the other's vectors (vector ids are chunk row ids, which coincide) and ``verify --repair`` of one
leaves the other's alone. The nodes of one workspace share its catalog, so its id and collections. A
workspace built before the ids keeps its collection (its old name) without re-embedding.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

from gitkb import Workspace
from gitkb.cli.main import cli
from gitkb.stores.catalog import indexes as index_rows
from gitkb.stores.vector_collections import collection_name
from helpers import ok, wait_until

pytestmark = pytest.mark.slow
CHROMA = Path(__file__).resolve().parents[1] / ".venv" / "bin" / "chroma"
IDENTITY = "hashing/hashing-384"


@pytest.fixture
def chroma_server(tmp_path: Path) -> Iterator[tuple[str, int]]:
    """A Chroma server of this test's own."""
    if not CHROMA.exists():
        pytest.skip("no chroma CLI in .venv")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
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


def on_server(make_ws: Callable[..., Any], at: Path, server: tuple[str, int], **kw: Any) -> Any:
    at.mkdir(exist_ok=True)
    (at / "gitkb.toml").write_text(
        f'[embedding]\nprovider = "hashing"\nmodel = "hashing-384"\n[chroma]\nhost = "{server[0]}"\nport = {server[1]}\n'
    )
    return make_ws(at=at, **kw)


def fill(w: Any, index: str, word: str, n: int) -> None:
    ok(w.document_index("CREATE_INDEX", index_name=index))
    for i in range(n):
        text = f"# {word} {i}\n\nThe {word} runbook, step {i}: check the {word} gauges.\n"
        ok(w.document_index("ADD_TEXT", index_name=index, text=text, filepath=f"{word}-{i}.md"))
    ok(w.build_embeddings())


def own_vectors(w: Any) -> tuple[int, set[str]]:
    """How many vectors the workspace's collection holds, and the index ids they name."""
    store = w.ctx.vectors
    ids = store.ids_in(IDENTITY)
    return store.count(IDENTITY), {str(m.get("index_id")) for m in store.get_metadata(IDENTITY, ids).values()}


def index_ids(w: Any) -> set[str]:
    return {r.id for r in index_rows.list_all(w.ctx.catalog.conn)}


def semantic_paths(w: Any, index: str, query: str) -> set[str]:
    got = ok(w.document_index("SEARCH", index_name=index, query=query, mode="semantic", top_n=20))
    return {str(r["filepath"]) for r in got["Results"]}


def test_two_workspaces_on_one_server_keep_their_own_vectors(
    make_ws: Callable[..., Any], tmp_path: Path, chroma_server: tuple[str, int]
) -> None:
    a = on_server(make_ws, tmp_path / "a", chroma_server)
    b = on_server(make_ws, tmp_path / "b", chroma_server)
    fill(a, "notes", "aurora", 5)
    fill(b, "other", "borealis", 8)  # chunk row ids 1..8: they coincide with a's 1..5
    assert a.ctx.vectors.collection_name(IDENTITY) != b.ctx.vectors.collection_name(IDENTITY)
    assert own_vectors(a) == (5, index_ids(a))
    assert own_vectors(b) == (8, index_ids(b))
    assert semantic_paths(a, "notes", "aurora runbook") == {f"aurora-{i}.md" for i in range(5)}
    names = {c["name"] for c in ok(a.embeddings_status())["collections"]}
    assert names == {a.ctx.vectors.collection_name(IDENTITY)}  # b's collection is not a's to list

    got = ok(a.verify(repair=True))
    assert ok(a.verify())["clean"] is True, got
    assert own_vectors(b) == (8, index_ids(b))  # a's repair did not touch b's vectors
    assert ok(b.verify())["clean"] is True
    assert own_vectors(a) == (5, index_ids(a))


def test_nodes_of_one_workspace_share_its_collection(
    make_ws: Callable[..., Any], tmp_path: Path, chroma_server: tuple[str, int]
) -> None:
    (tmp_path / "shared").mkdir()
    url = f"sqlite:///{tmp_path / 'shared' / 'catalog.sqlite3'}"
    a = on_server(make_ws, tmp_path / "node-a", chroma_server, catalog_url=url)
    fill(a, "notes", "aurora", 4)
    b = on_server(make_ws, tmp_path / "node-b", chroma_server, catalog_url=url)
    assert b.ctx.vectors.collection_name(IDENTITY) == a.ctx.vectors.collection_name(IDENTITY)
    assert own_vectors(b) == (4, index_ids(a))
    assert semantic_paths(b, "notes", "aurora runbook") == {f"aurora-{i}.md" for i in range(4)}


def test_a_restore_with_a_new_workspace_id_runs_beside_its_original(
    make_ws: Callable[..., Any], tmp_path: Path, chroma_server: tuple[str, int]
) -> None:
    w = on_server(make_ws, tmp_path / "orig", chroma_server)
    fill(w, "notes", "aurora", 5)
    archive = tmp_path / "kb.backup"
    ok(w.backup(str(archive)))
    copy = tmp_path / "copy"
    got = CliRunner().invoke(cli, ["--json", "restore", "--new-workspace-id", str(archive), str(copy)])
    assert got.exit_code == 0, got.output
    out = json.loads(got.stdout)
    assert out["embeddings"]["chunks_embedded"] == 5 and out["differences"] == [], out  # its own collection
    with Workspace(copy, catalog_url=f"sqlite:///{copy / 'catalog.sqlite3'}") as r:
        assert r.ctx.vectors.collection_name(IDENTITY) != w.ctx.vectors.collection_name(IDENTITY)
        ok(r.document_index("ADD_TEXT", index_name="notes", text="The aurora copy note.", filepath="copy.md"))
        ok(r.build_embeddings())
        ok(r.verify(repair=True))
        assert own_vectors(r) == (6, index_ids(r))
    assert own_vectors(w) == (5, index_ids(w))  # the copy's writes and repair did not reach the original's
    assert ok(w.verify())["clean"] is True


def as_before_workspace_ids(home: Path, server: tuple[str, int]) -> str:
    """Put a workspace back to what a gitkb without workspace ids left: the catalog before
    ``m025_chroma18_workspace_id`` (same rows, no id) and the collection under the old name, with the
    old metadata (no ``workspace``). Returns the old name."""
    import chromadb  # heavy: chromadb; only this test talks to the server directly

    conn = sqlite3.connect(home / "catalog.sqlite3")
    with conn:
        (ws_id,) = conn.execute("SELECT value FROM workspace_state WHERE key = 'workspace_id'").fetchone()
        conn.execute("DELETE FROM workspace_state WHERE key IN ('workspace_id', 'vector_legacy_identities')")
        conn.execute("DELETE FROM migrations WHERE name = 'm025_chroma18_workspace_id'")
    conn.close()
    client = chromadb.HttpClient(host=server[0], port=server[1])
    new = client.get_collection(collection_name(IDENTITY, ws_id), embedding_function=None)
    got = new.get(include=["embeddings", "metadatas"])
    old_name = collection_name(IDENTITY)
    md = {k: v for k, v in (new.metadata or {}).items() if k != "workspace"}
    old = client.create_collection(old_name, metadata=md, embedding_function=None)
    old.upsert(ids=got["ids"], embeddings=got["embeddings"], metadatas=got["metadatas"])
    client.delete_collection(new.name)
    return old_name


def test_a_workspace_built_before_workspace_ids_keeps_its_vectors(
    make_ws: Callable[..., Any], tmp_path: Path, chroma_server: tuple[str, int]
) -> None:
    home = tmp_path / "old"
    w = on_server(make_ws, home, chroma_server, catalog_url=f"sqlite:///{home / 'catalog.sqlite3'}")
    fill(w, "notes", "aurora", 6)
    w.close()
    old_name = as_before_workspace_ids(home, chroma_server)

    up = on_server(make_ws, home, chroma_server, catalog_url=f"sqlite:///{home / 'catalog.sqlite3'}")
    assert up.ctx.vectors.collection_name(IDENTITY) == old_name
    status = ok(up.embeddings_status())
    assert status["pending_embeddings"] == 0 and [c["name"] for c in status["collections"]] == [old_name]
    assert own_vectors(up) == (6, index_ids(up))
    assert ok(up.verify())["clean"] is True
    assert semantic_paths(up, "notes", "aurora runbook") == {f"aurora-{i}.md" for i in range(6)}

    # a workspace made now, same identity, same server: its own collection, the old one untouched
    fresh = on_server(make_ws, tmp_path / "fresh", chroma_server)
    fill(fresh, "other", "borealis", 9)
    assert fresh.ctx.vectors.collection_name(IDENTITY) != old_name
    ok(fresh.verify(repair=True))
    assert own_vectors(up) == (6, index_ids(up))
    assert own_vectors(fresh) == (9, index_ids(fresh))


def test_the_migration_gives_an_id_and_keeps_the_identities_in_use() -> None:
    """``m025_chroma18_workspace_id`` on a catalog at the step before: a random id each time, and the
    identities the catalog already used (bound, pinned, saved) recorded to keep their old names; a
    catalog made now records none."""
    from gitkb.stores.catalog import vector_state as vs
    from gitkb.stores.catalog.migrations import migrate

    def catalog(rows: bool) -> sqlite3.Connection:
        conn = sqlite3.connect(":memory:", isolation_level=None)
        migrate(conn, upto="m024_ingest20_drop_chunks_index")
        if rows:
            for ix, pinned in (("kidx_1", None), ("kidx_2", "openai/text-embedding-3-small")):
                conn.execute(
                    "INSERT INTO indexes(id, name, created_at, updated_at, embedding_identity) VALUES (?, ?, 0, 0, ?)",
                    (ix, ix, pinned),
                )
            conn.execute("INSERT INTO index_vectors VALUES ('kidx_1', 'hashing/hashing-384', 0, 0)")
            conn.execute(
                "INSERT INTO workspace_state VALUES ('embedding_identity', 'fastembed/all-minilm-l6-v2', 0)"
            )
        assert migrate(conn)[0] == "m025_chroma18_workspace_id"  # later migrations may follow
        return conn

    old, again, new = catalog(True), catalog(True), catalog(False)
    naming = vs.vector_naming(old)
    assert naming.legacy == {
        "hashing/hashing-384",
        "openai/text-embedding-3-small",
        "fastembed/all-minilm-l6-v2",
    }
    assert naming.name("hashing/hashing-384") == "hashing_hashing-384_index"
    ws = naming.workspace_id
    assert ws and naming.name("hashing/other") == f"hashing_other_index_{ws}"
    assert vs.vector_naming(again).workspace_id not in (None, ws)
    fresh = vs.vector_naming(new)
    assert fresh.legacy == frozenset() and fresh.name("hashing/hashing-384").endswith(
        f"_{fresh.workspace_id}"
    )
