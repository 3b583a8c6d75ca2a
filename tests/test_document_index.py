"""The core action API (issue: document index core) through ``Workspace.document_index``:
real SQLite catalog and real tantivy index in a temp workspace."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from gitkb import Workspace
from helpers import ok


def fails(resp: dict[str, Any], code: str) -> dict[str, Any]:
    assert resp["Success"] is False, resp
    assert resp["code"] == code, resp
    assert isinstance(resp["Error"], str) and resp["Error"]
    assert "Traceback" not in resp["Error"]
    return resp


JOB_LOG = {"migrations", "jobs", "writer_state"}  # the record of attempts, not index data


def snapshot(home: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every catalog table's rows but the job log: to show that a refused call wrote nothing."""
    con = sqlite3.connect(home / "catalog.sqlite3")
    try:
        tables = [
            r[0]
            for r in con.execute(
                "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%'"
            )
        ]
        return {
            t: sorted(con.execute(f"SELECT * FROM {t}").fetchall(), key=repr)
            for t in tables
            if t not in JOB_LOG
        }
    finally:
        con.close()


def test_create_list_rename_delete_index(ws: Workspace) -> None:
    r = ok(ws.document_index("CREATE_INDEX", index_name="kb", chunk_size=200, chunk_overlap=20))
    assert r["chunk_config"] == {"chunk_strategy": "sentence", "chunk_size": 200, "chunk_overlap": 20}
    ok(ws.document_index("ADD_TEXT", index_name="kb", text="The launch checklist lives here."))
    listing = ok(ws.document_index("LIST_INDICES"))
    assert listing["Indices"] == ["kb"]
    assert listing["IndexDetails"]["kb"]["file_count"] == 1
    ok(ws.document_index("RENAME_INDEX", index_name="kb", new_index_name="kb2"))
    hits = ok(ws.document_index("SEARCH", query="launch checklist", index_name="kb2"))["Results"]
    assert hits and hits[0]["index_name"] == "kb2"
    d = ok(ws.document_index("DELETE_INDEX", index_name="kb2"))
    assert d["Message"] == "Index deleted successfully"
    assert ok(ws.document_index("LIST_INDICES"))["Indices"] == []
    assert ok(ws.document_index("SEARCH", query="launch checklist"))["Results"] == []


def test_add_directory_paths_report_and_unchanged(ws: Workspace, kb_copy: Path) -> None:
    ok(ws.document_index("CREATE_INDEX", index_name="kb"))
    (kb_copy / "docs" / "node_modules").mkdir()
    (kb_copy / "docs" / "node_modules" / "x.md").write_text("# junk\n")
    (kb_copy / "docs" / "runbooks" / "05-dual-targeting.md").write_text("# Dual targeting\n\nKept.\n")
    (kb_copy / "docs" / "runbooks" / "blob.bin").write_bytes(b"\x00\x01\x02binary")
    r = ok(ws.document_index("ADD_DOCUMENTS", index_name="kb", filepath=str(kb_copy / "docs")))
    assert "docs/runbooks/rotate-api-keys.md" in r["added"]
    assert "docs/runbooks/05-dual-targeting.md" in r["added"]
    cats = {s["path"]: s["category"] for s in r["skipped"]}
    assert cats.get("docs/runbooks/blob.bin") == "binary"
    assert any(p.startswith("docs/node_modules") and c == "excluded" for p, c in cats.items())
    assert r["counts"]["added"] == len(r["added"]) and r["modified"] == [] and r["unchanged"] == []
    again = ok(ws.document_index("ADD_DOCUMENTS", index_name="kb", filepath=str(kb_copy / "docs")))
    assert (
        again["added"] == [] and again["modified"] == [] and sorted(again["unchanged"]) == sorted(r["added"])
    )
    assert again["chunks_written"] == 0
    (kb_copy / "docs" / "runbooks" / "rotate-api-keys.md").write_text(
        "---\ntitle: Rotate\n---\n# Rotate\n\nNew text.\n"
    )
    third = ok(ws.document_index("ADD_DOCUMENTS", index_name="kb", filepath=str(kb_copy / "docs")))
    assert third["modified"] == ["docs/runbooks/rotate-api-keys.md"]


def test_single_file_stored_under_its_name_and_base_path(ws: Workspace, kb_copy: Path) -> None:
    ok(ws.document_index("CREATE_INDEX", index_name="kb"))
    f = kb_copy / "docs" / "policies" / "password-policy.md"
    assert ok(ws.document_index("ADD_DOCUMENTS", index_name="kb", filepath=str(f)))["added"] == [
        "password-policy.md"
    ]
    r = ok(ws.document_index("ADD_DOCUMENTS", index_name="kb", filepath=str(f), base_path=str(kb_copy)))
    assert r["added"] == ["docs/policies/password-policy.md"]


def test_search_citation_fields_and_line_ranges(ws: Workspace, kb_copy: Path) -> None:
    ok(ws.document_index("CREATE_INDEX", index_name="kb"))
    ok(ws.document_index("ADD_DOCUMENTS", index_name="kb", filepath=str(kb_copy / "docs")))
    res = ok(ws.document_index("SEARCH", query="promote the replica pg_ctl", top_n=3))["Results"]
    top = res[0]
    assert top["filepath"] == "docs/runbooks/database-failover.md"
    assert top["document_title"] == "Database failover"
    assert top["id"].startswith("kchk_") and top["index_name"] == "kb" and top["score"] > 0
    lines = (kb_copy / "docs/runbooks/database-failover.md").read_text().splitlines()
    loc = top["location"]
    cited = "\n".join(lines[loc["line_start"] - 1 : loc["line_end"]])
    assert "pg_ctl promote" in cited
    assert "promote" in top["snippet"].lower()
    assert top["source_uri"].startswith("file://")


def test_search_across_indexes_and_stemming(ws: Workspace) -> None:
    ok(ws.document_index("CREATE_INDEX", index_name="a"))
    ok(ws.document_index("CREATE_INDEX", index_name="b"))
    ok(ws.document_index("ADD_TEXT", index_name="a", text="Rotating keys is mandatory."))
    ok(ws.document_index("ADD_TEXT", index_name="b", text="We rotate the keys every quarter."))
    res = ok(ws.document_index("SEARCH", query="rotation of key"))["Results"]
    assert {r["index_name"] for r in res} == {"a", "b"}
    only_b = ok(ws.document_index("SEARCH", query="rotate keys", index_name="b"))["Results"]
    assert [r["index_name"] for r in only_b] == ["b"]


def test_list_documents_paging(ws: Workspace) -> None:
    ok(ws.document_index("CREATE_INDEX", index_name="kb"))
    for i in range(142):
        ok(
            ws.document_index(
                "ADD_TEXT", index_name="kb", text=f"note number {i}", filepath=f"notes/n{i:03}.txt"
            )
        )
    r = ok(ws.document_index("LIST_DOCUMENTS", index_name="kb"))
    assert r["TotalCount"] == 142 and r["count"] == 50 and r["actual_count"] == 50 and r["has_more"]
    assert r["next_start"] == 50
    assert r["Message"] == "Showing first 50 of 142 items. 92 more items exist."
    keys = list(r)
    assert keys.index("TotalCount") < keys.index("Documents") and keys.index("next_start") < keys.index(
        "Documents"
    )
    assert r["total_count"] == 142
    over = ws.document_index("LIST_DOCUMENTS", index_name="kb", start=140, count=500)
    assert over["Success"] is False and over["code"] == "invalid_argument"  # a page holds at most 50
    last = ok(ws.document_index("LIST_DOCUMENTS", index_name="kb", start=140, count=50))
    assert last["count"] == 50 and last["actual_count"] == 2 and not last["has_more"]
    files = ok(
        ws.document_index("LIST_DOCUMENTS", index_name="kb", show_files_only=True, path_filter="notes/n00*")
    )
    assert [d["path"] for d in files["Documents"]] == [f"notes/n00{i}.txt" for i in range(10)]


def test_get_document_modes(ws: Workspace) -> None:
    ok(ws.document_index("CREATE_INDEX", index_name="kb", chunk_size=20, chunk_overlap=0))
    text = "".join(f"Line {i} says something sensible.\n" for i in range(250))
    r = ok(ws.document_index("ADD_TEXT", index_name="kb", text=text, filepath="big.txt"))
    fid = r["file_id"]
    lines = ok(
        ws.document_index("GET_DOCUMENT", index_name="kb", filepath="big.txt", pagination_mode="lines")
    )
    assert lines["start"] == 0 and lines["actual_count"] == 100 and lines["has_more"]
    assert lines["Content"].startswith("Line 0 says")
    p2 = ok(
        ws.document_index(
            "GET_DOCUMENT", index_name="kb", file_id=fid, pagination_mode="lines", start=200, count=100
        )
    )
    assert p2["actual_count"] == 50 and not p2["has_more"] and p2["Content"].startswith("Line 200 says")
    chars = ok(
        ws.document_index(
            "GET_DOCUMENT", index_name="kb", filepath="/big.txt/", pagination_mode="chars", start=5, count=10
        )
    )
    assert chars["Content"] == text[5:15]
    chunks = ok(ws.document_index("GET_DOCUMENT", index_name="kb", filepath="big.txt"))
    assert chunks["count"] == 20 and len(chunks["Chunks"]) == 20 and chunks["has_more"]
    assert chunks["Chunks"][0]["location"]["line_start"] == 1


def test_delete_and_rename_document_keep_chunk_ids(ws: Workspace) -> None:
    ok(ws.document_index("CREATE_INDEX", index_name="kb"))
    ok(
        ws.document_index(
            "ADD_TEXT", index_name="kb", text="Escalate to the duty manager.", filepath="ops/escalation.md"
        )
    )
    before = ok(ws.document_index("SEARCH", query="duty manager"))["Results"][0]["id"]
    r = ok(
        ws.document_index(
            "RENAME_DOCUMENT", index_name="kb", filepath="ops/escalation.md", new_filename="escalate.md"
        )
    )
    assert r["filepath"] == "ops/escalate.md"
    after = ok(ws.document_index("SEARCH", query="duty manager"))["Results"][0]
    assert after["id"] == before and after["filepath"] == "ops/escalate.md"
    ok(ws.document_index("DELETE_DOCUMENT", index_name="kb", filepath="/ops/escalate.md"))
    assert ok(ws.document_index("SEARCH", query="duty manager"))["Results"] == []


def test_delete_orphan_by_file_id_when_file_is_gone(ws: Workspace, tmp_path: Path) -> None:
    f = tmp_path / "gone.md"
    f.write_text("# Gone\n\nSoon deleted.\n")
    ok(ws.document_index("CREATE_INDEX", index_name="kb"))
    ok(ws.document_index("ADD_DOCUMENTS", index_name="kb", filepath=str(f)))
    fid = ok(ws.document_index("LIST_DOCUMENTS", index_name="kb"))["Documents"][0]["file_id"]
    f.unlink()
    ok(ws.document_index("DELETE_DOCUMENT", index_name="kb", file_id=fid))
    assert ok(ws.document_index("LIST_DOCUMENTS", index_name="kb"))["TotalCount"] == 0


def test_indices_stats_report_chunk_config_and_counts(ws: Workspace) -> None:
    ok(ws.document_index("CREATE_INDEX", index_name="plain"))
    ok(ws.document_index("CREATE_INDEX", index_name="tuned", chunk_size=300, chunk_overlap=30))
    st = ok(ws.document_index("GET_INDICES_STATS"))["Stats"]
    assert st["plain"]["chunk_config"] == {"chunk_size": None, "chunk_overlap": None, "chunk_strategy": None}
    assert st["tuned"]["chunk_config"]["chunk_size"] == 300 and st["tuned"]["needs_reindex"] is False
    assert st["plain"]["file_count"] == 0 and "created_at" in st["plain"]


def test_one_chunk_per_doc_warns_about_size(ws: Workspace) -> None:
    r = ok(
        ws.document_index("CREATE_INDEX", index_name="kb", chunk_strategy="one_chunk_per_doc", chunk_size=100)
    )
    assert any("ignored" in w for w in r.get("Warnings", []))


BAD_CALLS: list[tuple[str, dict[str, Any], str]] = [
    ("SEARCH", {"query": "x", "index_name": "nope"}, "not_found"),
    ("ADD_TEXT", {"index_name": "nope", "text": "x"}, "not_found"),
    ("CREATE_INDEX", {"index_name": "kb"}, "conflict"),
    ("CREATE_INDEX", {"index_name": "-bad name"}, "invalid_argument"),
    ("CREATE_INDEX", {"index_name": "x" * 129}, "invalid_argument"),
    ("CREATE_INDEX", {"index_name": "new", "chunk_size": 100, "chunk_overlap": 100}, "invalid_argument"),
    ("CREATE_INDEX", {"index_name": "new", "chunk_size": 100, "chunk_overlap": -1}, "invalid_argument"),
    ("ADD_DOCUMENTS", {"index_name": "kb", "filepath": "/definitely/missing"}, "not_found"),
    ("ADD_DOCUMENTS", {"index_name": "kb", "filepath": "EXCLUDED"}, "invalid_argument"),
    (
        "ADD_DOCUMENTS",
        {"index_name": "kb", "filepath": "DOCS", "chunk_size": 10, "chunk_overlap": 10},
        "invalid_argument",
    ),
    ("LIST_DOCUMENTS", {"index_name": "kb", "start": -1}, "invalid_argument"),
    ("LIST_DOCUMENTS", {"index_name": "kb", "count": -5}, "invalid_argument"),
    ("GET_DOCUMENT", {"index_name": "kb", "filepath": "a.txt", "start": -1}, "invalid_argument"),
    ("GET_DOCUMENT", {"index_name": "kb"}, "invalid_argument"),
    ("GET_DOCUMENT", {"index_name": "kb", "filepath": "a.txt", "file_id": "doc_x"}, "invalid_argument"),
    ("DELETE_DOCUMENT", {"index_name": "kb"}, "invalid_argument"),
    ("DELETE_DOCUMENT", {"index_name": "kb", "filepath": "a.txt", "file_id": "doc_x"}, "invalid_argument"),
    ("DELETE_DOCUMENT", {"index_name": "kb", "filepath": "missing.txt"}, "not_found"),
    (
        "RENAME_DOCUMENT",
        {"index_name": "kb", "filepath": "a.txt", "new_filename": "../b.txt"},
        "invalid_argument",
    ),
    ("FROBNICATE", {}, "invalid_argument"),
    ("SEARCH", {"query": "x", "bogus": 1}, "invalid_argument"),
    ("SEARCH", {"query": "x", "top_n": 0}, "invalid_argument"),
    ("SEARCH", {"query": ""}, "invalid_argument"),
    ("RENAME_INDEX", {"index_name": "kb", "new_index_name": "kb"}, "conflict"),
]


@pytest.mark.parametrize(
    ("action", "params", "code"), BAD_CALLS, ids=[f"{a}-{c}-{i}" for i, (a, _, c) in enumerate(BAD_CALLS)]
)
def test_bad_input_clear_error_nothing_written(
    ws: Workspace, home: Path, kb_copy: Path, action: str, params: dict[str, Any], code: str
) -> None:
    ok(ws.document_index("CREATE_INDEX", index_name="kb"))
    ok(ws.document_index("ADD_TEXT", index_name="kb", text="hello there", filepath="a.txt"))
    ok(ws.build_embeddings())  # let the background embedder settle before the snapshot
    (kb_copy / "main.o").write_text("not really an object file\n")
    subst = {"EXCLUDED": str(kb_copy / "main.o"), "DOCS": str(kb_copy / "docs")}
    params = {k: subst.get(v, v) if isinstance(v, str) else v for k, v in params.items()}
    before = snapshot(home)
    resp = fails(ws.document_index(action, **params), code)
    json.dumps(resp)
    assert snapshot(home) == before


def test_parallel_chunking_gives_the_same_chunks(
    ws: Workspace, kb_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Big ingests chunk in a worker process; the result must not depend on where chunking ran."""
    import gitkb.services.indexing.ingest as ingest

    ok(ws.document_index("CREATE_INDEX", index_name="serial", embeddings=False))
    ok(ws.document_index("CREATE_INDEX", index_name="parallel", embeddings=False))
    ok(ws.document_index("ADD_DOCUMENTS", index_name="serial", filepath=str(kb_copy / "docs")))
    monkeypatch.setattr(ingest, "PARALLEL_MIN_FILES", 1)
    monkeypatch.setattr(ingest, "WRITE_BATCH", 3)  # several batches in flight
    r = ok(ws.document_index("ADD_DOCUMENTS", index_name="parallel", filepath=str(kb_copy / "docs")))
    assert r["counts"]["added"] == 6  # the 6 pages; the 2 sidecars are skipped as configuration

    def spans(index: str) -> list[tuple[str, int, int, int, int]]:
        rows = ws.ctx.catalog.conn.execute(
            "SELECT d.path, c.char_start, c.char_end, c.line_start, c.line_end FROM chunks c"
            " JOIN documents d ON d.rowid = c.document_rowid JOIN indexes i ON i.id = c.index_id"
            " WHERE i.name = ? ORDER BY d.path, c.ordinal",
            (index,),
        )
        return [tuple(x) for x in rows]

    assert spans("parallel") == spans("serial") and spans("serial")


def test_list_documents_filters(ws: Workspace) -> None:
    ok(ws.document_index("CREATE_INDEX", index_name="kb"))
    docs = {
        "ops/runbooks/rotate-keys.md": "# Rotating keys\n\nRotate the signing keys every 90 days.\n\n## Pager\n\nPage the on-call engineer.",
        "ops/runbooks/restart.md": "# Restart\n\nRestart the web service after a deploy.",
        "policies/laptops.md": "# Laptops\n\nEncrypt every laptop disk. Keys live in the vault.",
        "notes/misc.txt": "Nothing about rotation here, only lunch menus.",
    }
    for path, text in docs.items():
        ok(ws.document_index("ADD_TEXT", index_name="kb", text=text, filepath=path))

    def paths(**kw: Any) -> list[str]:
        r = ok(ws.document_index("LIST_DOCUMENTS", index_name="kb", **kw))
        assert r["TotalCount"] == len(r["Documents"])
        return [d["path"] for d in r["Documents"]]

    # path_filter: any part of the path; globs over the whole path still work
    assert paths(path_filter="runbooks") == ["ops/runbooks/restart.md", "ops/runbooks/rotate-keys.md"]
    assert paths(path_filter="keys") == ["ops/runbooks/rotate-keys.md"]
    assert paths(path_filter="ops/") == ["ops/runbooks/restart.md", "ops/runbooks/rotate-keys.md"]
    assert paths(path_filter="*.txt") == ["notes/misc.txt"]
    assert paths(path_filter="ops/*/r*.md") == ["ops/runbooks/restart.md", "ops/runbooks/rotate-keys.md"]
    # query: every word in the content (any chunk, title or heading), from the keyword index
    assert paths(query="signing keys") == ["ops/runbooks/rotate-keys.md"]
    assert paths(query="keys") == ["ops/runbooks/rotate-keys.md", "policies/laptops.md"]
    assert paths(query="signing pager") == ["ops/runbooks/rotate-keys.md"]  # words in different chunks
    assert paths(query="keys lunch") == []
    assert paths(query="vault", path_filter="ops/") == [] and paths(query="vault", path_filter="ops") == [
        "policies/laptops.md"
    ]
    assert paths(query="restart") == ["ops/runbooks/restart.md"]  # not matched by path: by content
    assert paths(query="misc") == []  # a path word is not content
    fails(ws.document_index("LIST_DOCUMENTS", index_name="kb", query="the and of"), "invalid_argument")
    # show_files_only: the same entries, without chunk details
    full = ok(ws.document_index("LIST_DOCUMENTS", index_name="kb", path_filter="rotate"))["Documents"][0]
    files = ok(
        ws.document_index("LIST_DOCUMENTS", index_name="kb", path_filter="rotate", show_files_only=True)
    )["Documents"][0]
    assert full["chunk_count"] == files["chunk_count"] == len(full["chunks"]) >= 1
    assert {k: v for k, v in full.items() if k != "chunks"} == files and "chunks" not in files
    assert files["filepath"] == files["path"] == "ops/runbooks/rotate-keys.md"
    assert set(full["chunks"][0]) == {"id", "ordinal", "line_start", "line_end", "heading_path"}
