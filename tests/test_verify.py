"""gitkb verify [--index NAME] [--repair]: each store damaged on purpose (tantivy segment files
deleted, keyword entries dropped or added, vectors dropped, orphan vectors and collections added, a
clone removed, a watermark moved past the log), found by verify and fixed by repair; search and
status answer a damaged keyword index with an error naming `gitkb verify --repair`.
Real tantivy files, a real embedded Chroma (hashing embedder), real clones of a bare remote."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from gitkb.cli.main import cli
from gitkb.stores.catalog import changes
from gitkb.stores.keywords import KeywordDoc
from helpers import SOURCE, ok
from helpers.http_shape import error_code

QUERY = "rotate api keys"


def fill(w: Any, kb_copy: Path) -> None:
    ok(w.document_index("CREATE_INDEX", index_name="kb"))
    ok(w.document_index("ADD_DOCUMENTS", index_name="kb", filepath=str(kb_copy / "docs")))
    ok(w.build_embeddings())


def kinds(d: dict[str, Any], key: str = "differences") -> dict[str, int]:
    return {x["kind"]: x["count"] for x in d[key]}


def hits(w: Any, mode: str) -> list[str]:
    got = ok(w.document_index("SEARCH", query=QUERY, mode=mode, top_n=5))
    return [str(r["id"]) for r in got["Results"]]


def identity(w: Any) -> str:
    return str(ok(w.embeddings_status())["identity"])


def test_clean_workspace_verifies_clean(ws: Any, kb_copy: Path) -> None:
    fill(ws, kb_copy)
    got = ok(ws.verify())
    assert got["clean"] is True and got["differences"] == [], got
    assert ok(ws.verify(index_name="kb"))["clean"] is True


def test_deleted_segment_files_found_and_rebuilt(
    make_ws: Callable[..., Any], home: Path, kb_copy: Path
) -> None:
    w = make_ws()
    fill(w, kb_copy)
    before = hits(w, "keyword")
    assert before
    w.close()
    segments = [p for p in (home / "keywords").rglob("*") if p.suffix in (".term", ".idx", ".store")]
    assert segments
    for p in segments:
        p.unlink()

    w = make_ws()  # opening no longer crashes on the damage
    failed = w.document_index("SEARCH", query=QUERY, mode="keyword")
    assert failed["Success"] is False and failed["code"] == "store_unavailable", failed
    assert "gitkb verify --repair" in failed["Error"]
    status = ok(w.get_index_status())
    assert status["status"] == "failed" and "gitkb verify --repair" in status["error"], status
    # a write still reaches the catalog (the truth); the keyword side waits for the repair
    extra = home.parent / "extra.md"
    extra.write_text("# Extra\n\nthe signing certificates expire twice a year\n")
    ok(w.document_index("ADD_DOCUMENTS", index_name="kb", filepath=str(extra)))

    found = ok(w.verify())
    assert kinds(found) == {"keyword_index_unreadable": 1}, found
    assert found["clean"] is False
    fixed = ok(w.verify(repair=True))
    assert fixed["clean"] is True and fixed["remaining"] == [], fixed
    assert any("rebuilt the keyword index" in line for line in fixed["repaired"]), fixed
    assert hits(w, "keyword") == before
    found_extra = ok(w.document_index("SEARCH", query="signing certificates", mode="keyword"))
    assert [r["filepath"] for r in found_extra["Results"]][:1] == ["extra.md"], found_extra
    assert ok(w.get_index_status())["status"] == "queryable"
    assert ok(w.verify())["clean"] is True


def test_missing_orphan_and_duplicate_keyword_entries(ws: Any, kb_copy: Path) -> None:
    fill(ws, kb_copy)
    before = hits(ws, "keyword")
    cids = sorted(ws.ctx.keywords.all_cids())
    gone = cids[:4]
    ws.ctx.keywords.apply(removes=gone, adds=[])
    ws.ctx.keywords.apply(removes=[], adds=[KeywordDoc(987654, "nowhere", None, "orphan", "rotate api keys")])
    ws.ctx.keywords.commit()
    found = ok(ws.verify())
    # the orphan's index has no catalog row: its folder is an orphan too
    assert kinds(found) == {"keyword_missing": 4, "keyword_orphan": 1, "keyword_orphan_folder": 1}, found
    missing = next(d for d in found["differences"] if d["kind"] == "keyword_missing")
    assert missing["sample"] == [str(c) for c in gone] and missing["store"] == "keywords"
    assert kinds(ok(ws.verify(index_name="kb"))) == {"keyword_missing": 4}  # orphans: workspace-wide only

    fixed = ok(ws.verify(repair=True))
    assert fixed["clean"] is True, fixed
    assert sorted(ws.ctx.keywords.all_cids()) == cids
    assert hits(ws, "keyword") == before


def test_pending_changes_are_not_differences(ws: Any, kb_copy: Path) -> None:
    """Entries past a watermark are not applied yet by design: not reported."""
    fill(ws, kb_copy)
    conn = ws.ctx.catalog.conn
    with ws.ctx.catalog.write() as w:
        changes.set_watermark(w, "keywords", 0)
    ws.ctx.keywords.clear()
    assert changes.watermark(conn, "keywords") == 0
    assert ok(ws.verify())["clean"] is True


def test_dropped_and_orphan_vectors_and_unused_collection(ws: Any, kb_copy: Path) -> None:
    fill(ws, kb_copy)
    ident = identity(ws)
    store = ws.ctx.vectors
    ids = sorted(store.ids_in(ident), key=int)
    vectors = store.get_vectors(ident, ids[:3])
    fp = store.fingerprint_of(ident)
    store.delete(ident, ids[:3])
    store.upsert(fp, ["987654"], [[0.1] * 384], [{"index_id": "nowhere"}])
    store.upsert("hashing/leftover@4", ["1"], [[0.5] * 4])
    found = ok(ws.verify())
    assert kinds(found) == {"vector_missing": 3, "vector_orphan": 1, "unused_collection": 1}, found
    assert {d["store"] for d in found["differences"]} == {f"vectors:{ident}", "vectors:hashing/leftover"}

    fixed = ok(ws.verify(repair=True))
    assert fixed["clean"] is True and fixed["remaining"] == [], fixed
    assert sorted(store.ids_in(ident), key=int) == ids
    assert "hashing/leftover" not in {c["identity"] for c in store.list_collections()}
    jobs = ok(ws.list_jobs())["Jobs"]
    assert [j["status"] for j in jobs if j["kind"] == "verify_repair"] == ["completed"], jobs  # on the writer
    again = store.get_vectors(ident, ids[:3])
    assert all(max(abs(a - b) for a, b in zip(vectors[i], again[i], strict=True)) < 1e-6 for i in vectors)
    assert hits(ws, "semantic")
    assert ok(ws.verify())["clean"] is True


def test_watermark_past_the_log_head(ws: Any, kb_copy: Path) -> None:
    fill(ws, kb_copy)
    conn = ws.ctx.catalog.conn
    head = changes.head(conn)
    with ws.ctx.catalog.write() as w:
        changes.set_watermark(w, "keywords", head + 50)
    found = ok(ws.verify())
    assert kinds(found) == {"watermark_ahead": 1}, found
    assert ok(ws.verify(repair=True))["clean"] is True
    assert changes.watermark(conn, "keywords") == head


def test_removed_clone_found_and_cloned_again(source_ws: Any) -> None:
    ws = source_ws
    row = ws.ctx.catalog.conn.execute("SELECT id FROM sources").fetchone()
    clone = ws.ctx.settings.repos_path / row[0]
    assert clone.is_dir()
    shutil.rmtree(clone)
    assert ok(ws.document_index("SEARCH", query=QUERY, mode="keyword"))["Results"]  # still answers
    ok(ws.get_index_status())
    found = ok(ws.verify())
    assert kinds(found) == {"clone_missing": 1}, found
    assert SOURCE in found["differences"][0]["sample"][0]
    fixed = ok(ws.verify(repair=True))
    assert fixed["clean"] is True, fixed
    assert (clone / "HEAD").exists() or (clone / ".git").exists()
    (ws.ctx.settings.repos_path / "stray").mkdir()
    stray = ok(ws.verify(repair=True))
    assert kinds(stray) == {"clone_orphan": 1} and kinds(stray, "remaining") == {"clone_orphan": 1}
    assert (ws.ctx.settings.repos_path / "stray").is_dir()  # reported, never removed


def test_cli_exit_codes_and_json(make_ws: Callable[..., Any], home: Path, kb_copy: Path) -> None:
    w = make_ws()
    fill(w, kb_copy)
    ident = identity(w)
    w.ctx.vectors.delete(ident, sorted(w.ctx.vectors.ids_in(ident))[:2])
    w.close()
    (home / "gitkb.toml").write_text('[embedding]\nprovider = "hashing"\nmodel = "hashing-384"\n')

    def gitkb(*args: str) -> Any:
        return CliRunner().invoke(cli, ["--home", str(home), *args], catch_exceptions=False)

    res = gitkb("verify")
    assert res.exit_code == 1, res.output
    assert "vector_missing" in res.output and "gitkb verify --repair" in res.output
    res = gitkb("--json", "verify", "--index", "kb")
    assert res.exit_code == 1, res.output
    assert kinds(json.loads(res.stdout)) == {"vector_missing": 2}
    res = gitkb("verify", "--repair")
    assert res.exit_code == 0, res.output
    assert "repaired: re-embedded" in res.output
    res = gitkb("--json", "verify")
    assert res.exit_code == 0 and json.loads(res.stdout)["clean"] is True, res.output
    res = gitkb("verify", "--index", "nope")
    assert res.exit_code == 1 and "no index 'nope'" in res.output


def test_http_verify_and_repair(make_client: Callable[..., Any], kb_copy: Path) -> None:
    client = make_client()
    ws = client.app.state.gitkb.workspace  # the app's own workspace: fill it through the library
    fill(ws, kb_copy)
    ident = identity(ws)
    ws.ctx.vectors.delete(ident, sorted(ws.ctx.vectors.ids_in(ident))[:1])
    resp = client.post("/verify", json={})
    assert resp.status_code == 200, resp.text
    assert kinds(resp.json()) == {"vector_missing": 1}
    resp = client.post("/verify", json={"index_name": "kb", "repair": True})
    assert resp.status_code == 200 and resp.json()["clean"] is True, resp.text
    resp = client.post("/verify", json={"repair": "yes"})
    assert resp.status_code == 422 and error_code(resp) in ("validation", "invalid_argument"), resp.text


def test_verify_needs_operate(ws: Any, kb_copy: Path) -> None:
    """One action, class operate (with or without repair): a reader is refused and nothing changes."""
    from gitkb.services.access import principals

    fill(ws, kb_copy)
    ident = identity(ws)
    ws.ctx.vectors.delete(ident, sorted(ws.ctx.vectors.ids_in(ident))[:1])
    reader = ws.as_principal(principals.token("r", ("read",)))
    for repair in (False, True):
        refused = reader.verify(repair=repair)
        assert refused["Success"] is False and refused["code"] == "forbidden", refused
    assert kinds(ok(ws.verify())) == {"vector_missing": 1}
    operator = ws.as_principal(principals.token("ops", ("operate",)))
    assert ok(operator.verify(repair=True))["clean"] is True


def test_cli_on_a_damaged_keyword_index(make_ws: Callable[..., Any], home: Path, kb_copy: Path) -> None:
    """search and status on the CLI: no traceback, the error names `gitkb verify --repair`."""
    w = make_ws()
    fill(w, kb_copy)
    w.close()
    for p in (home / "keywords").rglob("*"):
        if p.suffix in (".term", ".idx"):
            p.unlink()
    (home / "gitkb.toml").write_text('[embedding]\nprovider = "hashing"\nmodel = "hashing-384"\n')

    def gitkb(*args: str) -> Any:
        return CliRunner().invoke(cli, ["--home", str(home), *args], catch_exceptions=False)

    res = gitkb("search", QUERY, "--mode", "keyword")
    assert res.exit_code == 1 and "gitkb verify --repair" in res.output, res.output
    assert "Traceback" not in res.output
    res = gitkb("status")
    assert res.exit_code == 0 and "gitkb verify --repair" in res.output, res.output
    res = gitkb("verify")
    assert res.exit_code == 1 and "keyword_index_unreadable" in res.output, res.output
    res = gitkb("verify", "--repair")
    assert res.exit_code == 0 and "rebuilt the keyword index" in res.output, res.output
    res = gitkb("search", QUERY, "--mode", "keyword")
    assert res.exit_code == 0, res.output


def test_clone_behind_the_synced_commit_is_fetched(source_ws: Any, upstream: Any) -> None:
    """The catalog says a commit was synced that the clone lacks (a clone restored from an older
    copy): clone_behind, and repair fetches it."""
    ws = source_ws
    upstream.write("runbooks/new-page.md", "# New page\n\nText.\n")
    sha = upstream.commit_push("a commit the clone has not fetched")
    conn = ws.ctx.catalog.conn
    synced = conn.execute("SELECT synced_commit FROM sources").fetchone()[0]
    with ws.ctx.catalog.write() as w:
        w.execute("UPDATE sources SET synced_commit = ?", (sha,))
    found = ok(ws.verify())
    assert kinds(found) == {"clone_behind": 1}, found
    fixed = ok(ws.verify(repair=True))
    assert fixed["clean"] is True and any("fetched source" in x for x in fixed["repaired"]), fixed
    with ws.ctx.catalog.write() as w:
        w.execute("UPDATE sources SET synced_commit = ?", (synced,))
    assert ok(ws.verify())["clean"] is True


def test_vector_store_directory_removed(make_ws: Callable[..., Any], kb_copy: Path) -> None:
    """Every vector gone (the embedded Chroma's directory removed): search still answers,
    verify counts every chunk as missing, repair embeds them again."""
    w = make_ws()
    fill(w, kb_copy)
    path = w.ctx.settings.vectors_path
    chunks = len(ok(w.verify())["differences"]) + w.ctx.vectors.count(identity(w))
    w.close()
    shutil.rmtree(path)
    w = make_ws()
    assert ok(w.document_index("SEARCH", query=QUERY, top_n=3))["Results"]
    ok(w.get_index_status())
    found = ok(w.verify())
    assert kinds(found) == {"vector_missing": chunks}, found
    assert ok(w.verify(repair=True))["clean"] is True
    assert w.ctx.vectors.count(identity(w)) == chunks
