"""Model change: stranded indexes (needs_reindex, chunk_config nulls), keyword fallback,
re-embed from the catalog's text, pinned indexes unaffected; DELETE_INDEX purges every
identity's collection, reports a collection it could not purge, and a retry finishes."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gitkb import Workspace
from helpers import fails, ok


def collections(w: Workspace) -> dict[str, int]:
    return {c["identity"]: c["count"] for c in ok(w.embeddings_status())["collections"]}


@pytest.fixture
def w(make_ws: Callable[..., Workspace], kb_copy: Path) -> Workspace:
    ws = make_ws(embedding_model="old-model")
    ok(ws.document_index("CREATE_INDEX", index_name="kb", chunk_size=300, chunk_overlap=30))
    ok(ws.document_index("ADD_DOCUMENTS", index_name="kb", filepath=str(kb_copy / "docs")))
    ok(
        ws.document_index(
            "CREATE_INDEX", index_name="pinned", embedding_provider="hashing", embedding_model="pin"
        )
    )
    ok(ws.document_index("ADD_DOCUMENTS", index_name="pinned", filepath=str(kb_copy / "docs" / "policies")))
    ok(ws.document_index("CREATE_INDEX", index_name="empty"))
    ok(ws.build_embeddings())
    return ws


def test_stranded_index_after_model_change_then_reembed(w: Workspace) -> None:
    n = ok(w.document_index("GET_INDICES_STATS"))["Stats"]["kb"]["chunk_count"]
    assert collections(w) == {"hashing/old-model": n, "hashing/pin": 2}
    changed = ok(w.set_embedding_identity("hashing", "New-Model"))
    assert changed["identity"] == "hashing/new-model" and changed["previous_identity"] == "hashing/old-model"
    stats = ok(w.document_index("GET_INDICES_STATS"))
    kb = stats["Stats"]["kb"]
    assert kb["needs_reindex"] is True and kb["vectors"] == "stranded"
    assert kb["chunk_config"] == {"chunk_size": None, "chunk_overlap": None, "chunk_strategy": None}
    assert kb["vectors_identity"] == "hashing/old-model" and kb["embedding_identity"] == "hashing/new-model"
    assert stats["Stats"]["pinned"]["needs_reindex"] is False  # a pin does not follow the active identity
    assert stats["Stats"]["empty"]["needs_reindex"] is False  # nothing to re-embed
    assert stats["EmbeddingIdentityState"]["identity"] == "hashing/new-model"
    # inventory works, search falls back to keyword for the stranded index, with a warning
    assert ok(w.document_index("LIST_INDICES"))["IndexDetails"]["kb"]["needs_reindex"] is True
    r = ok(w.document_index("SEARCH", query="rotate the payments key", index_name="kb"))
    assert r["mode"] == "keyword" and r["Results"]
    assert any("needs re-embedding" in x and "reembed" in x for x in r["Warnings"])
    fails(
        w.document_index("SEARCH", query="rotate the payments key", index_name="kb", mode="semantic"),
        "conflict",
    )
    added = ok(
        w.document_index(
            "ADD_TEXT", index_name="kb", text="Added after the model change.", filepath="new.txt"
        )
    )
    assert any("needs re-embedding" in x for x in added["Warnings"])
    # an empty index just follows the new identity
    ok(
        w.document_index(
            "ADD_TEXT", index_name="empty", text="First text of the empty index.", filepath="e.txt"
        )
    )
    assert (
        ok(w.document_index("GET_INDICES_STATS"))["Stats"]["empty"]["vectors_identity"] == "hashing/new-model"
    )
    assert ok(w.build_embeddings())["chunks_embedded"] in (0, 1)  # the empty index's text (kb stays stranded)
    assert ok(w.document_index("GET_INDICES_STATS"))["Stats"]["kb"]["needs_reindex"] is True
    # re-embed: from the catalog's text into the new collection; the old one lets go of the index
    re = ok(w.reembed())
    assert re["reembedded"] == ["kb"] and re["chunks_embedded"] == n + 1 and re["cost"]["texts"] == n + 1
    kb = ok(w.document_index("GET_INDICES_STATS"))["Stats"]["kb"]
    assert (
        kb["needs_reindex"] is False and kb["vectors"] == "ready" and kb["chunk_config"]["chunk_size"] == 300
    )
    assert collections(w) == {"hashing/old-model": 0, "hashing/new-model": n + 2, "hashing/pin": 2}
    hyb = ok(w.document_index("SEARCH", query="rotate the payments key", index_name="kb"))
    assert hyb["mode"] == "hybrid" and "Warnings" not in hyb
    assert ok(w.reembed())["reembedded"] == []  # nothing stranded any more


def test_reembed_one_index_and_bad_input(w: Workspace) -> None:
    ok(w.set_embedding_identity("hashing", "new-model"))
    fails(w.reembed("nope"), "not_found")
    ok(w.document_index("CREATE_INDEX", index_name="kw", embeddings=False))
    fails(w.reembed("kw"), "invalid_argument")
    r = ok(w.reembed("kb"))
    assert r["reembedded"] == ["kb"] and r["chunks_embedded"] > 0
    # re-embedding an index that is not stranded costs nothing: its vectors are found by content hash
    again = ok(w.reembed("kb"))
    assert again["chunks_embedded"] == 0


def test_delete_index_purges_every_identity_collection(w: Workspace) -> None:
    from gitkb.core.embedders.hashing import HashingEmbedder

    kb_id = ok(w.document_index("LIST_INDICES"))["IndexDetails"]["kb"]["index_id"]
    # a leftover in another identity's collection (e.g. from before a model change)
    stray = HashingEmbedder("other", dims=16).embed_batch(["leftover"])
    w.ctx.vectors.upsert("hashing/other@16", ["999999"], stray, [{"index_id": kb_id}])
    assert collections(w)["hashing/other"] == 1
    ok(w.document_index("DELETE_INDEX", index_name="kb"))
    assert collections(w) == {"hashing/old-model": 0, "hashing/other": 0, "hashing/pin": 2}


def test_delete_index_names_the_collection_it_could_not_purge_and_retry_finishes(
    w: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gitkb.core.errors import StoreUnavailable
    from gitkb.stores.vectors import VectorStore

    real = VectorStore.delete_where

    def broken(self: VectorStore, identity: str, where: Any) -> int:
        if identity == "hashing/old-model":
            raise StoreUnavailable("vector store unavailable during delete: connection reset")
        return real(self, identity, where)

    monkeypatch.setattr(VectorStore, "delete_where", broken)
    w.ctx.embedding_worker.close()  # only DELETE_INDEX retries here
    r = fails(w.document_index("DELETE_INDEX", index_name="kb"), "store_unavailable")
    name = w.ctx.vectors.collection_name("hashing/old-model")  # with the workspace's id
    assert name.startswith("hashing_old-model_index_")
    assert name in r["Error"] and "again" in r["Error"]
    assert r["surviving_collections"] == [name]
    assert "kb" not in ok(w.document_index("LIST_INDICES"))["Indices"]  # gone from the catalog
    assert collections(w)["hashing/old-model"] > 0  # but its vectors survive
    fails(w.document_index("DELETE_INDEX", index_name="kb"), "store_unavailable")  # still broken
    monkeypatch.setattr(VectorStore, "delete_where", real)
    done = ok(w.document_index("DELETE_INDEX", index_name="kb"))
    assert done["Message"] == "Index deleted successfully"
    assert collections(w)["hashing/old-model"] == 0
    fails(w.document_index("DELETE_INDEX", index_name="kb"), "not_found")


def test_cli_model_change(tmp_path: Path, kb_copy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gitkb.cli.main import cli

    monkeypatch.setenv("GITKB_EMBEDDING_PROVIDER", "hashing")
    monkeypatch.setenv("GITKB_EMBEDDING_MODEL", "a")
    home = str(tmp_path / "cliws")
    runner = CliRunner()

    def invoke(*args: str) -> Any:
        return runner.invoke(cli, ["--home", home, *args], catch_exceptions=False)

    assert invoke("index", "create", "kb").exit_code == 0
    assert invoke("add", "kb", str(kb_copy / "docs" / "runbooks")).exit_code == 0
    assert invoke("embeddings", "use", "hashing", "b").exit_code == 0
    stats = json.loads(invoke("--json", "index", "stats").output)["Stats"]["kb"]
    assert stats["needs_reindex"] is True
    out = invoke("embeddings", "reembed", "--index", "kb")
    assert out.exit_code == 0 and "re-embedded 1 index(es)" in out.output
    assert json.loads(invoke("--json", "index", "stats").output)["Stats"]["kb"]["needs_reindex"] is False
    rechunked = invoke("index", "rechunk", "kb", "--chunk-size", "64", "--chunk-overlap", "8")
    assert rechunked.exit_code == 0 and "re-chunked" in rechunked.output
    assert invoke("index", "rechunk", "nope").exit_code == 1
