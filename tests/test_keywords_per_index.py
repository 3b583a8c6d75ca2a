"""One tantivy index per gitkb index (issue 20): an index's BM25 scores are its own.

Index A's keyword scores and order do not move when index B (other texts, sharing A's words) is
added to the home -- through the library, the CLI (``gitkb search --json``), HTTP and MCP -- and a
dropped index's folder goes. Before, the home had one tantivy index filtered by ``index_id``: B's
texts changed A's document frequencies and average lengths. Real tantivy, real SQLite catalog."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
import tantivy
from click.testing import CliRunner
from mcp import Client

from gitkb import Workspace
from gitkb.cli.main import cli
from gitkb.mcp import build_server
from gitkb.mcp.render import parse_block
from gitkb.stores.keyword_schema import ANALYZER, NO_TENANT, WRITER_HEAP, KeywordDoc, _analyzer, _schema
from gitkb.stores.keywords import KeywordIndex
from helpers import ok
from helpers.nodes import node_settings, sqlite_url

QUERY = "rotate the signing keys"
A_TEXTS = [
    "# Keys\n\nRotate the signing keys every ninety days and revoke the old ones.",
    "# Certificates\n\nSigning certificates expire; renew them before the keys rotate.",
    "# Passwords\n\nPasswords are rotated by the vault, never by hand.",
    "# Backups\n\nBackups are encrypted with a key kept apart from the data.",
]
B_TEXTS = [
    f"# Note {i}\n\nThe build signs artifacts; keys are rotated by the release team, batch {i}. "
    + "Long filler words about pipelines and caches and runners. " * (i % 5 + 1)
    for i in range(25)
]


def _fill(w: Any, name: str, texts: list[str]) -> None:
    ok(w.document_index("CREATE_INDEX", index_name=name))
    for i, t in enumerate(texts):
        ok(w.document_index("ADD_TEXT", index_name=name, text=t, filepath=f"{name}-{i}.md"))


def _lib(w: Any) -> list[tuple[str, float]]:
    res = ok(w.document_index("SEARCH", query=QUERY, indexes=["a"], mode="keyword", top_n=10))
    return [(r["filepath"], r["score"]) for r in res["Results"]]


def _cli(home: Path) -> list[tuple[str, float]]:
    ran = CliRunner().invoke(
        cli,
        ["--home", str(home), "--json", "search", QUERY, "--index", "a", "--mode", "keyword"],
        catch_exceptions=False,
    )
    assert ran.exit_code == 0, ran.output
    return [(r["filepath"], r["score"]) for r in json.loads(ran.output)["Results"]]


def _http(client: Any) -> list[tuple[str, float]]:
    got = client.post("/search", json={"query": QUERY, "index_name": "a", "mode": "keyword", "top_n": 10})
    assert got.status_code == 200, got.text
    return [(r["filepath"], r["score"]) for r in got.json()["Results"]]


def _mcp(w: Any) -> list[tuple[str, float]]:
    async def main() -> str:
        async with Client(build_server(w, "bot")) as c:
            result = await c.call_tool("search_index", {"query": QUERY, "mode": "keyword", "top_n": 10})
            assert not result.is_error, result.content[0].text
            return str(result.content[0].text)

    body = parse_block(anyio.run(main))
    return [(str(r.get("id")), r["score"]) for r in body["Results"]]


def _everywhere(make_ws: Callable[..., Any], make_client: Callable[..., Any], home: Path) -> dict[str, Any]:
    w = make_ws()
    out: dict[str, Any] = {"lib": _lib(w), "mcp": _mcp(w)}
    w.close()
    out["cli"] = _cli(home)
    out["http"] = _http(make_client())
    return out


def test_an_index_scores_alike_whatever_else_the_home_holds(
    make_ws: Callable[..., Any], make_client: Callable[..., Any], home: Path
) -> None:
    w = make_ws()
    _fill(w, "a", A_TEXTS)
    ok(w.kb_create("kb-a", ["a"]))
    ok(w.agent_assign("bot", ["kb-a"]))
    w.close()
    alone = _everywhere(make_ws, make_client, home)
    assert alone["lib"] and [p for p, _ in alone["lib"]][:1] == ["a-0.md"], alone
    assert alone["cli"] == alone["http"] == alone["lib"]

    w = make_ws()
    _fill(w, "b", B_TEXTS)  # shares "rotate", "signing", "keys": moved A's idf and avgdl before
    w.close()
    shared = _everywhere(make_ws, make_client, home)
    assert shared == alone
    w = make_ws()
    assert sorted(p.name for p in (home / "keywords").iterdir()) == sorted(_ids(w, "a", "b"))


def _ids(w: Any, *names: str) -> list[str]:
    conn = w.ctx.catalog.conn
    return [conn.execute("SELECT id FROM indexes WHERE name = ?", (n,)).fetchone()[0] for n in names]


def test_a_home_of_the_old_single_index_is_rebuilt_into_folders(
    make_ws: Callable[..., Any], home: Path
) -> None:
    """The layout before: one tantivy index at ``keywords/`` (``meta.json`` at the top) holding every
    index's chunks with an ``index_id`` field. Written here as that code wrote it (same schema and
    analyzer, one ``tantivy.Index`` at the top), with an extra entry no catalog chunk has: opening
    the home rebuilds the new layout from the catalog and never reads the old files."""
    w = make_ws()
    _fill(w, "a", A_TEXTS)
    want = _lib(w)
    _fill(w, "b", B_TEXTS)
    rows = w.ctx.catalog.conn.execute(
        "SELECT c.rowid, c.index_id, c.text FROM chunks c ORDER BY c.rowid"
    ).fetchall()
    w.close()
    kw_dir = home / "keywords"
    _write_old_layout(kw_dir, rows)

    w = make_ws()
    assert _lib(w) == want  # A's own statistics, as before B came
    assert not (kw_dir / "meta.json").exists()
    assert sorted(p.name for p in kw_dir.iterdir()) == sorted(_ids(w, "a", "b"))
    assert sorted(w.ctx.keywords.all_cids()) == [int(r[0]) for r in rows]
    assert ok(w.verify())["clean"] is True


def _write_old_layout(kw_dir: Path, rows: list[Any]) -> None:
    shutil.rmtree(kw_dir)
    kw_dir.mkdir()
    old = tantivy.Index(_schema(), path=str(kw_dir), reuse=True)
    old.register_tokenizer(ANALYZER, _analyzer())
    writer = old.writer(WRITER_HEAP, 1)
    for cid, index_id, text in [*rows, (99999, rows[0][1], "rotate the signing keys " * 5)]:
        doc = tantivy.Document()
        doc.add_unsigned("cid", int(cid))
        doc.add_text("index_id", str(index_id))
        doc.add_text("tenant", NO_TENANT)
        doc.add_text("title", "")
        doc.add_text("text", str(text))
        writer.add_document(doc)
    writer.commit()
    writer.wait_merging_threads()
    del writer, old
    assert (kw_dir / "meta.json").is_file()


def test_a_node_not_writing_rebuilds_its_old_layout_before_its_first_search(tmp_path: Path) -> None:
    """A node of a shared catalog keeps its own keyword index; the old layout there is rebuilt by
    that node (it owns its home) before its first search answers, though nothing is pending."""
    url = sqlite_url(_shared(tmp_path) / "catalog.sqlite3")
    a = Workspace(settings=node_settings(tmp_path / "a", url, {}))
    b = Workspace(settings=node_settings(tmp_path / "b", url, {}))
    try:
        _fill(a, "a", A_TEXTS)
        want = _lib(b)
        rows = a.ctx.catalog.conn.execute("SELECT rowid, index_id, text FROM chunks").fetchall()
        b.close()
        _write_old_layout(tmp_path / "b" / "keywords", rows)
        b = Workspace(settings=node_settings(tmp_path / "b", url, {}))
        assert not b.ctx.is_writer and b.ctx.keywords_owner
        assert _lib(b) == want
        assert not (tmp_path / "b" / "keywords" / "meta.json").exists()
    finally:
        b.close()
        a.close()


def _shared(tmp_path: Path) -> Path:
    d = tmp_path / "shared"
    d.mkdir()
    return d


def test_multi_index_search_merges_by_score_and_drop_removes_the_folder(tmp_path: Path) -> None:
    kw = KeywordIndex(tmp_path / "kw")
    kw.apply(
        removes=[],
        adds=[
            KeywordDoc(1, "kidx_a", None, "", "rotate keys"),
            KeywordDoc(2, "kidx_a", None, "", "rotate keys rotate keys and much more text here"),
            KeywordDoc(3, "kidx_b", None, "", "rotate keys"),
            KeywordDoc(4, "kidx_b", None, "", "nothing"),
        ],
    )
    kw.commit()
    both = kw.search("rotate keys", index_ids=["kidx_b", "kidx_a"], limit=10)
    assert [s for _c, s in both] == sorted((s for _c, s in both), reverse=True)
    assert {c for c, _ in both} == {1, 2, 3}
    assert kw.search("rotate keys", index_ids=None, limit=10) == both  # None: every index
    alone_a = kw.search("rotate keys", index_ids=["kidx_a"], limit=10)
    assert [h for h in both if h[0] in (1, 2)] == alone_a
    # a cid moving to another index (RECHUNK's switch) leaves the first folder
    kw.apply(removes=[], adds=[KeywordDoc(1, "kidx_b", None, "", "rotate keys")])
    kw.commit()
    assert kw.all_cids() == {1: 1, 2: 1, 3: 1, 4: 1}
    assert kw.count(["kidx_a"]) == 1 and kw.count(["kidx_b"]) == 3
    # added and removed before any commit (a feed): gone from the folder it was added to
    kw.apply(removes=[], adds=[KeywordDoc(9, "kidx_a", None, "", "pending words")])
    kw.apply(removes=[9], adds=[])
    kw.commit()
    assert 9 not in kw.all_cids()
    kw.apply(removes=[], adds=[], drop_indexes=["kidx_b"])
    kw.commit()
    assert not (tmp_path / "kw" / "kidx_b").exists() and kw.folders() == ["kidx_a"]
    kw.apply(removes=[], adds=[], drop_indexes=["kidx_b"])  # replayed after a crash: nothing left to do
    kw.commit()
    assert kw.all_cids() == {2: 1}


def test_verify_and_repair_cover_every_index_folder(make_ws: Callable[..., Any], home: Path) -> None:
    """A folder gone, a folder of no index, an entry in another index's folder, a damaged folder."""
    w = make_ws()
    _fill(w, "a", A_TEXTS)
    _fill(w, "b", B_TEXTS[:5])
    want = _lib(w)
    a_id, b_id = _ids(w, "a", "b")
    kw = w.ctx.keywords
    cids = dict(kw.all_cids())
    a_cids = sorted(kw.cids_by_index()[a_id])
    with w.ctx.keyword_lock:
        kw.drop_folder(b_id)  # a folder gone
        kw.apply(removes=[], adds=[KeywordDoc(777777, "kidx_gone", None, "", "left by a crash")])
        # one of A's chunks filed under B: A's scores would use B's statistics
        kw.apply(removes=[], adds=[KeywordDoc(a_cids[0], b_id, None, "", "rotate the signing keys")])
        kw.commit()
    found = {d["kind"]: d for d in ok(w.verify())["differences"]}
    assert set(found) == {"keyword_missing", "keyword_orphan", "keyword_orphan_folder", "keyword_misfiled"}
    assert found["keyword_orphan_folder"]["sample"] == ["kidx_gone"]
    assert found["keyword_misfiled"]["sample"] == [str(a_cids[0])]
    fixed = ok(w.verify(repair=True))
    assert fixed["clean"] is True, fixed
    assert kw.all_cids() == cids and sorted(kw.folders()) == sorted([a_id, b_id])
    assert _lib(w) == want
    w.close()

    for p in (home / "keywords" / b_id).iterdir():  # one folder of two damaged
        if p.suffix in (".term", ".idx"):
            p.unlink()
    w = make_ws()
    found = ok(w.verify())
    assert [d["kind"] for d in found["differences"]] == ["keyword_index_unreadable"], found
    assert ok(w.verify(repair=True))["clean"] is True
    assert w.ctx.keywords.all_cids() == cids and _lib(w) == want


CHILD = """
import os, sys
from gitkb import Workspace
from gitkb.services.derived.catchup import catch_up_keywords
from gitkb.stores.catalog import changes
with Workspace(sys.argv[1], embedding_provider="hashing") as ws:
    for name in ("a", "b"):
        ws.document_index("CREATE_INDEX", index_name=name)
        for i in range(6):
            ws.document_index("ADD_TEXT", index_name=name, text=f"# {name} {i}\\n\\nrotate keys {i}", filepath=f"{i}.md")
    with ws.ctx.write_lock:
        with ws.ctx.catalog.write() as w:
            changes.set_watermark(w, ws.ctx.keywords_mark, 0)  # one batch replays both indexes
        os.environ["GITKB_CRASH_AT"] = "keywords.between_indexes"
        catch_up_keywords(ws.ctx)
print("not killed")
"""


def test_a_kill_between_two_index_commits_replays_the_batch(tmp_path: Path) -> None:
    """SIGKILL after index a's commit, before b's: the watermark did not move; the restart applies
    the batch again, each chunk once, in its own index's folder."""
    home = tmp_path / "ws"
    proc = subprocess.run([sys.executable, "-c", CHILD, str(home)], capture_output=True, timeout=300)
    assert proc.returncode == -9, (proc.returncode, proc.stderr.decode()[-2000:])
    with Workspace(home, embedding_provider="hashing") as w:
        conn = w.ctx.catalog.conn
        want: dict[str, dict[int, int]] = {}
        for cid, ix in conn.execute("SELECT rowid, index_id FROM chunks"):
            want.setdefault(ix, {})[int(cid)] = 1
        assert w.ctx.keywords.cids_by_index() == want
        assert ok(w.verify())["clean"] is True
        res = ok(w.document_index("SEARCH", query="rotate keys", mode="keyword", top_n=20))["Results"]
        assert len(res) == 12


def test_rechunk_leaves_the_rebuilt_chunks_in_the_index_folder(
    make_ws: Callable[..., Any], home: Path
) -> None:
    """RECHUNK builds under a temporary index id, then swaps: the new chunks end up in the target's
    folder (scored with its own statistics), the temporary folder is gone, B is untouched."""
    w = make_ws()
    _fill(w, "a", A_TEXTS)
    _fill(w, "b", B_TEXTS[:5])
    a_id, b_id = _ids(w, "a", "b")
    b_before = w.ctx.keywords.cids_by_index()[b_id]
    ok(w.document_index("RECHUNK", index_name="a", chunk_size=12, chunk_overlap=2))
    conn = w.ctx.catalog.conn
    a_cids = {int(c): 1 for (c,) in conn.execute("SELECT rowid FROM chunks WHERE index_id = ?", (a_id,))}
    assert len(a_cids) > len(A_TEXTS)  # cut smaller
    assert w.ctx.keywords.cids_by_index() == {a_id: a_cids, b_id: b_before}
    assert sorted(p.name for p in (home / "keywords").iterdir()) == sorted([a_id, b_id])
    assert ok(w.verify())["clean"] is True
    hits = _lib(w)
    assert hits and hits[0][0] in {"a-0.md", "a-1.md"}


def test_rename_keeps_the_folder_and_delete_removes_it(make_ws: Callable[..., Any], home: Path) -> None:
    w = make_ws()
    _fill(w, "a", A_TEXTS)
    _fill(w, "b", B_TEXTS[:5])
    want = _lib(w)
    a_id, b_id = _ids(w, "a", "b")
    ok(w.document_index("RENAME_INDEX", index_name="b", new_index_name="b2"))
    assert sorted(p.name for p in (home / "keywords").iterdir()) == sorted([a_id, b_id])
    ok(w.document_index("DELETE_INDEX", index_name="b2"))  # after its catalog commit: the folder goes
    assert [p.name for p in (home / "keywords").iterdir()] == [a_id]
    assert _lib(w) == want
    ok(w.document_index("RENAME_INDEX", index_name="a", new_index_name="a2"))
    res = ok(w.document_index("SEARCH", query=QUERY, indexes=["a2"], mode="keyword", top_n=10))
    assert [(r["filepath"], r["score"]) for r in res["Results"]] == want
    assert ok(w.verify())["clean"] is True


REBUILD_CHILD = """
import os, sys
from gitkb import Workspace
os.environ["GITKB_CRASH_AT"] = sys.argv[2]
with Workspace(sys.argv[1], embedding_provider="hashing") as ws:
    ws.document_index("SEARCH", query="rotate", mode="keyword")
print("not killed")
"""


@pytest.mark.parametrize("point", ["keywords.rebuild_before_commit", "keywords.rebuild_before_commit:2"])
def test_a_kill_during_the_rebuild_of_an_old_layout_rebuilds_again(
    make_ws: Callable[..., Any], home: Path, point: str
) -> None:
    """SIGKILL while the old single index is being rebuilt into folders (one index committed at a
    time), before the first index's commit or between the two: the old layout is gone and the
    watermark is at the log's head, so a catch-up would apply nothing; the rebuild's mark makes the
    next open rebuild again, and every chunk is there."""
    w = make_ws()
    _fill(w, "a", A_TEXTS)
    _fill(w, "b", B_TEXTS)
    rows = w.ctx.catalog.conn.execute(
        "SELECT c.rowid, c.index_id, c.text FROM chunks c ORDER BY c.rowid"
    ).fetchall()
    w.close()
    _write_old_layout(home / "keywords", rows)
    proc = subprocess.run(
        [sys.executable, "-c", REBUILD_CHILD, str(home), point], capture_output=True, timeout=300
    )
    assert proc.returncode == -9, (proc.returncode, proc.stderr.decode()[-2000:])
    assert not (home / "keywords" / "meta.json").exists()  # cleared before the kill
    w = make_ws()
    res = ok(w.document_index("SEARCH", query=QUERY, mode="keyword", top_n=100))
    assert "Warnings" not in res
    assert sorted(w.ctx.keywords.all_cids()) == [int(r[0]) for r in rows]
    assert ok(w.verify())["clean"] is True


def test_a_search_while_the_keyword_index_is_rebuilt_says_so(make_ws: Callable[..., Any]) -> None:
    """Another thread holds the write lock (a rebuild under way): a search cannot rebuild and its
    keyword results may be incomplete; the answer warns (SEARCH, and ASK through it), and stops once
    the rebuild is done."""
    w = make_ws()
    _fill(w, "a", A_TEXTS)
    w.ctx.keywords.mark_rebuilding(True)
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with w.ctx.write_lock:
            held.set()
            release.wait(30)

    t = threading.Thread(target=hold)
    t.start()
    try:
        assert held.wait(10)
        res = ok(w.document_index("SEARCH", query=QUERY, mode="keyword"))
        assert any("being rebuilt" in x for x in res.get("Warnings", [])), res
        asked = ok(w.document_index("ASK", query=QUERY, mode="keyword"))
        assert any("being rebuilt" in x for x in asked.get("Warnings", [])), asked
    finally:
        release.set()
        t.join()
    res = ok(w.document_index("SEARCH", query=QUERY, mode="keyword"))  # rebuilds now, then answers
    assert "Warnings" not in res and res["Results"]
    assert not w.ctx.keywords.needs_rebuild
