"""get_index_status fields and incremental reindex of directory-fed indexes."""

from __future__ import annotations

import os
import time
from pathlib import Path

from gitkb import Workspace
from helpers import ok


def test_status_fields_and_skipped_files(ws: Workspace, tmp_path: Path) -> None:
    d = tmp_path / "docs"
    d.mkdir()
    (d / "good.md").write_text("---\ntitle: Good\n---\n# Good\n\nFine.\n")
    (d / "bad.md").write_text("---\ntitle: [unclosed\n---\n# Bad\n")
    (d / "latin.txt").write_bytes(b"\x81\x8d\x8f\x90\x9d" * 10)
    ok(ws.document_index("CREATE_INDEX", index_name="kb"))
    ok(ws.document_index("ADD_DOCUMENTS", index_name="kb", filepath=str(d)))
    st = ok(ws.get_index_status())
    for key in (
        "status",
        "documents_indexed",
        "documents_indexed_error",
        "error",
        "last_reindex_error",
        "last_build_embeddings_error",
        "queue_depth",
        "in_flight",
        "dirty_paths",
        "dirty_embeddings",
        "write_generation",
        "skipped_files",
    ):
        assert key in st, key
    assert (
        st["status"] == "queryable" and st["documents_indexed"] == 1 and st["documents_indexed_error"] is None
    )
    cats = {s["path"]: s["category"] for s in st["skipped_files"]}
    assert cats == {"docs/bad.md": "parse_error", "docs/latin.txt": "encoding_error"}
    (d / "bad.md").write_text("---\ntitle: Fixed\n---\n# Fixed\n")
    ok(ws.reindex())
    cats = {s["path"] for s in ok(ws.get_index_status())["skipped_files"]}
    assert cats == {"docs/latin.txt"}


def test_reindex_incremental_then_force(ws: Workspace, kb_copy: Path) -> None:
    docs = kb_copy / "docs"
    ok(ws.document_index("CREATE_INDEX", index_name="kb"))
    added = ok(ws.document_index("ADD_DOCUMENTS", index_name="kb", filepath=str(docs)))["added"]
    nochange = ok(ws.reindex())
    assert nochange["status"] == "completed"
    assert (nochange["added"], nochange["modified"], nochange["deleted"]) == (0, 0, 0)
    assert nochange["unchanged"] == len(added) and nochange["full_rebuild"] is False

    ids_before = {
        r["filepath"]: r["id"]
        for r in ok(ws.document_index("SEARCH", mode="keyword", query="incident commander", top_n=5))[
            "Results"
        ]
    }
    target = docs / "runbooks" / "rotate-api-keys.md"
    target.write_text(target.read_text() + "\nAlso rotate the webhook signing secret quarterly.\n")
    os.utime(target, (time.time() + 5, time.time() + 5))
    (docs / "policies" / "new-policy.md").write_text(
        "---\ntitle: Laptop policy\n---\n# Laptop policy\n\nEncrypt disks.\n"
    )
    (docs / "onboarding" / "first-week.md").unlink()
    r = ok(ws.reindex())
    assert r["paths"]["modified"] == ["docs/runbooks/rotate-api-keys.md"]
    assert r["paths"]["added"] == ["docs/policies/new-policy.md"]
    assert r["paths"]["deleted"] == ["docs/onboarding/first-week.md"]
    assert (r["added"], r["modified"], r["deleted"]) == (1, 1, 1)
    assert ok(ws.document_index("SEARCH", mode="keyword", query="webhook signing secret"))["Results"][0][
        "filepath"
    ].endswith("rotate-api-keys.md")
    assert ok(ws.document_index("SEARCH", mode="keyword", query="buddy laptop front desk"))[
        "Results"
    ] == [] or all(
        not x["filepath"].endswith("first-week.md")
        for x in ok(ws.document_index("SEARCH", mode="keyword", query="buddy laptop front desk"))["Results"]
    )
    ids_after = {
        r["filepath"]: r["id"]
        for r in ok(ws.document_index("SEARCH", mode="keyword", query="incident commander", top_n=5))[
            "Results"
        ]
    }
    assert ids_after == ids_before  # untouched documents keep their chunk ids

    forced = ok(ws.reindex(force=True))
    assert forced["full_rebuild"] is True and forced["modified"] == 0 and forced["unchanged"] == 0
    assert forced["added"] == len(forced["paths"]["added"]) == len(added)  # 8 - 1 deleted + 1 new
    # the per-index block says what the totals say (it said "modified 8" while the totals said "added 8")
    assert {k: forced["indexes"]["kb"][k] for k in ("added", "modified", "unchanged", "deleted")} == {
        "added": len(added),
        "modified": 0,
        "unchanged": 0,
        "deleted": 0,
    }
    again = {
        r["filepath"]: r["id"]
        for r in ok(ws.document_index("SEARCH", mode="keyword", query="incident commander", top_n=5))[
            "Results"
        ]
    }
    assert again == ids_before  # a forced rebuild keeps stable ids too
    st = ok(ws.get_index_status())
    assert st["caught_up"] and st["last_reindex_error"] is None


def test_reindex_of_a_vanished_root_deletes_its_documents(ws: Workspace, tmp_path: Path) -> None:
    d = tmp_path / "gone"
    d.mkdir()
    (d / "a.md").write_text("# A\n\nalpha\n")
    ok(ws.document_index("CREATE_INDEX", index_name="kb"))
    ok(ws.document_index("ADD_DOCUMENTS", index_name="kb", filepath=str(d)))
    (d / "a.md").unlink()
    d.rmdir()
    r = ok(ws.reindex(index_name="kb"))
    assert r["paths"]["deleted"] == ["gone/a.md"] and r["deleted"] == 1
    assert ws.reindex(index_name="nope")["code"] == "not_found"
