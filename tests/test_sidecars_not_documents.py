"""Sidecars (gitkb.yml, kb-manifest.json) configure ingestion; they are not documents (issue 21).

A walk (ADD_DOCUMENTS, reindex) reports them as skipped with category ``sidecar`` and a reason,
and indexes them only when the index was created with ``settings={"include_sidecars": true}``.
"""

from __future__ import annotations

from pathlib import Path

from gitkb import Workspace
from gitkb.core.exclusions import SIDECAR_FILES
from gitkb.services.changes.sources.selection import EffectiveConfig
from gitkb.services.changes.sources.sidecars import SCHEMA_FILES
from helpers import SOURCE, ok

QUESTION = "how do I promote the database replica"
SIDECARS = {"docs/gitkb.yml", "docs/kb-manifest.json"}


def _paths(ws: Workspace, index: str) -> set[str]:
    listing = ok(ws.document_index("LIST_DOCUMENTS", index_name=index, show_files_only=True, count=50))
    return {d["filepath"] for d in listing["Documents"]}


def test_the_quickstart_add_leaves_sidecars_out_and_says_why(ws: Workspace, kb_copy: Path) -> None:
    ok(ws.document_index("CREATE_INDEX", index_name="handbook"))
    r = ok(ws.document_index("ADD_DOCUMENTS", index_name="handbook", filepath=str(kb_copy / "docs")))
    skipped = {s["path"]: s for s in r["skipped"]}
    assert set(skipped) >= SIDECARS
    for path in SIDECARS:
        assert skipped[path]["category"] == "sidecar"
        assert (
            "configures ingestion" in skipped[path]["detail"]
            and "include_sidecars" in skipped[path]["detail"]
        )
    assert r["counts"]["skipped_sidecar"] == 2 and not SIDECARS & set(r["added"])
    assert not SIDECARS & _paths(ws, "handbook") and len(_paths(ws, "handbook")) == 6
    hits = ok(ws.document_index("SEARCH", query=QUESTION, index_name="handbook", top_n=3))["Results"]
    assert hits[0]["filepath"] == "docs/runbooks/database-failover.md"
    assert all(h["filepath"] not in SIDECARS for h in hits)
    # not a problem to fix: status lists only files that failed
    assert not SIDECARS & {s["path"] for s in ok(ws.get_index_status())["skipped_files"]}


def test_reindex_keeps_them_out(ws: Workspace, kb_copy: Path) -> None:
    ok(ws.document_index("CREATE_INDEX", index_name="handbook"))
    ok(ws.document_index("ADD_DOCUMENTS", index_name="handbook", filepath=str(kb_copy / "docs")))
    (kb_copy / "docs" / "gitkb.yml").write_text("index: handbook\nchunking:\n  strategy: sentence\n")
    r = ok(ws.reindex(force=True))
    assert not SIDECARS & set(r["paths"]["added"] + r["paths"]["modified"])
    assert {s["path"] for s in r["paths"]["skipped"] if s["category"] == "sidecar"} >= SIDECARS
    assert not SIDECARS & _paths(ws, "handbook")


def test_a_named_sidecar_is_left_out_too(ws: Workspace, kb_copy: Path) -> None:
    ok(ws.document_index("CREATE_INDEX", index_name="handbook"))
    r = ok(
        ws.document_index(
            "ADD_DOCUMENTS", index_name="handbook", filepath=str(kb_copy / "docs" / "gitkb.yml")
        )
    )
    assert r["added"] == [] and [s["category"] for s in r["skipped"]] == ["sidecar"]


def test_an_index_setting_includes_them(ws: Workspace, kb_copy: Path) -> None:
    ok(ws.document_index("CREATE_INDEX", index_name="config", settings={"include_sidecars": True}))
    r = ok(ws.document_index("ADD_DOCUMENTS", index_name="config", filepath=str(kb_copy / "docs")))
    assert set(r["added"]) >= SIDECARS and r["counts"]["skipped_sidecar"] == 0
    assert _paths(ws, "config") >= SIDECARS
    bad = ws.document_index("CREATE_INDEX", index_name="bad", settings={"include_sidecars": "yes"})
    assert (
        bad["Success"] is False and bad["code"] == "invalid_argument" and "include_sidecars" in bad["Error"]
    )


def test_git_sources_select_no_sidecar_at_any_depth() -> None:
    assert set(SIDECAR_FILES) == set(SCHEMA_FILES)  # the walk and the source reader agree on the names
    cfg = EffectiveConfig(documents_root="docs")
    assert cfg.selects("docs/runbooks/a.md")
    assert not cfg.selects("docs/gitkb.yml") and not cfg.selects("docs/kb-manifest.json")
    assert not cfg.selects("docs/team/gitkb.yml") and not cfg.selects("docs/team/kb-manifest.json")


def test_a_git_sync_names_the_sidecars_it_read_as_configuration(source_ws: Workspace) -> None:
    r = ok(source_ws.source_sync(SOURCE, full=True))
    assert r["sidecars"] == ["docs/gitkb.yml", "docs/kb-manifest.json"]
    assert not SIDECARS & set(r["added"] + r["modified"])
    assert not SIDECARS & _paths(source_ws, SOURCE)
