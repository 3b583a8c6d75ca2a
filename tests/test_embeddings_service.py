"""Embeddings as a service: identity (saved, seeded, normalised), fail-closed rules, the vector
catch-up (content-hash reuse, idempotency, cost events, clipping), the background embedder.
Real SQLite, tantivy and Chroma in a temp workspace; the fast ``hashing`` embedder."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from gitkb import Workspace
from helpers import catalog, ok, wait_until


def fails(resp: dict[str, Any], code: str) -> dict[str, Any]:
    assert resp["Success"] is False, resp
    assert resp["code"] == code, resp
    assert isinstance(resp["Error"], str) and resp["Error"] and "Traceback" not in resp["Error"]
    return resp


def snapshot(home: Path) -> dict[str, list[tuple[Any, ...]]]:
    return catalog.snapshot(home, leave_out=("migrations", "jobs", "writer_state", "writer_lease", "nodes"))


@pytest.fixture
def make_ws(make_ws: Callable[..., Workspace]) -> Callable[..., Workspace]:
    """The shared factory with the model ``h1`` (the identities below read ``hashing/h1``)."""
    return functools.partial(make_ws, embedding_model="h1")


def collections(w: Workspace) -> dict[str, int]:
    return {c["identity"]: c["count"] for c in ok(w.embeddings_status())["collections"]}


# -- identity ---------------------------------------------------------------------------------


def test_identity_normalised_alternate_spellings_share_one_collection(
    make_ws: Callable[..., Workspace],
) -> None:
    w = make_ws(embedding_provider="HASHING", embedding_model="hashing/Feature-X")
    a = ok(w.document_index("CREATE_INDEX", index_name="a"))
    assert a["embedding_identity"] == "hashing/feature-x"
    b = ok(
        w.document_index(
            "CREATE_INDEX", index_name="b", embedding_provider="Hashing", embedding_model="FEATURE-X"
        )
    )
    assert b["embedding_identity"] == "hashing/feature-x"
    ok(w.document_index("ADD_TEXT", index_name="a", text="Alpha text about rotation."))
    ok(w.document_index("ADD_TEXT", index_name="b", text="Beta text about failover."))
    ok(w.build_embeddings())
    assert collections(w) == {"hashing/feature-x": 2}
    st = ok(w.embeddings_status())
    assert st["identity"] == "hashing/feature-x" and st["fingerprint"] == "hashing/feature-x@384"
    assert st["provider"] == "hashing" and st["model"] == "feature-x" and st["available"] is True
    assert st["chunk_count"] == 2 and st["pending_embeddings"] == 0 and st["path"]


def test_saved_identity_wins_over_environment(
    make_ws: Callable[..., Workspace], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "ws"
    w = make_ws(home)
    st = ok(w.embeddings_status())
    assert st["EmbeddingIdentityState"] == {"resolved": True, "identity": "hashing/h1", "source": "settings"}
    ok(w.document_index("CREATE_INDEX", index_name="kb"))  # the first write saves the seed
    assert ok(w.embeddings_status())["EmbeddingIdentityState"]["source"] == "saved"
    w.close()
    monkeypatch.setenv("GITKB_EMBEDDING_PROVIDER", "hashing")
    monkeypatch.setenv("GITKB_EMBEDDING_MODEL", "other-model")
    w2 = Workspace(home)
    try:
        st = ok(w2.embeddings_status())
        assert st["identity"] == "hashing/h1" and st["EmbeddingIdentityState"]["source"] == "saved"
        assert ok(w2.document_index("CREATE_INDEX", index_name="kb2"))["embedding_identity"] == "hashing/h1"
    finally:
        w2.close()


def test_environment_seeds_identity_while_unset(
    make_ws: Callable[..., Workspace], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("GITKB_EMBEDDING_PROVIDER", "hashing")
    monkeypatch.setenv("GITKB_EMBEDDING_MODEL", "From-Env")
    w = Workspace(tmp_path / "envws")
    try:
        assert (
            ok(w.document_index("LIST_INDICES"))["EmbeddingIdentityState"]["identity"] == "hashing/from-env"
        )
        assert (
            ok(w.document_index("CREATE_INDEX", index_name="kb"))["embedding_identity"] == "hashing/from-env"
        )
    finally:
        w.close()


def test_pin_refuses_bad_input_and_writes_nothing(make_ws: Callable[..., Workspace], tmp_path: Path) -> None:
    w = make_ws()
    ok(w.document_index("CREATE_INDEX", index_name="kb"))
    before = snapshot(tmp_path / "ws")
    fails(w.document_index("CREATE_INDEX", index_name="x", embedding_provider="nosuch"), "invalid_argument")
    fails(w.document_index("CREATE_INDEX", index_name="x", embedding_model="m"), "invalid_argument")
    fails(
        w.document_index("CREATE_INDEX", index_name="x", embedding_provider="hashing", embeddings=False),
        "invalid_argument",
    )
    fails(w.document_index("CREATE_INDEX", index_name="x", embeddings="yes"), "invalid_argument")
    fails(w.set_embedding_identity("none"), "invalid_argument")
    assert snapshot(tmp_path / "ws") == before


# -- fail closed --------------------------------------------------------------------------------


def test_fail_closed_without_identity_but_inventory_and_keyword_work(
    make_ws: Callable[..., Workspace], tmp_path: Path
) -> None:
    w = make_ws(embedding_provider="none", embedding_model=None)
    before = snapshot(tmp_path / "ws")
    r = fails(w.document_index("CREATE_INDEX", index_name="kb"), "embedding_not_configured")
    assert "GITKB_EMBEDDING_PROVIDER" in r["Error"] and r["next_steps"]
    assert snapshot(tmp_path / "ws") == before
    ok(w.document_index("CREATE_INDEX", index_name="kw", embeddings=False))
    ok(
        w.document_index(
            "ADD_TEXT", index_name="kw", text="The launch checklist lives here.", filepath="a.txt"
        )
    )
    hits = ok(w.document_index("SEARCH", query="launch checklist", mode="keyword"))
    assert hits["Results"] and hits["mode"] == "keyword"
    assert ok(w.document_index("SEARCH", query="launch checklist"))["mode"] == "keyword"
    for mode in ("semantic", "hybrid"):
        fails(w.document_index("SEARCH", query="launch checklist", mode=mode), "embedding_not_configured")
    state = {"resolved": False, "identity": None, "source": "unresolved"}
    for action, params, field in (
        ("LIST_INDICES", {}, "Indices"),
        ("GET_INDICES_STATS", {}, "Stats"),
        ("LIST_DOCUMENTS", {"index_name": "kw"}, "Documents"),
    ):
        resp = ok(w.document_index(action, **params))
        assert resp[field]
        st = resp["EmbeddingIdentityState"]
        assert {k: st[k] for k in state} == state and st["code"] == "embedding_not_configured" and st["error"]
    assert ok(w.document_index("GET_INDICES_STATS"))["Stats"]["kw"]["needs_reindex"] is False
    st = ok(w.embeddings_status())
    assert st["available"] is False and st["identity"] is None


def test_fail_closed_write_to_embedding_index_when_identity_lost(
    make_ws: Callable[..., Workspace], tmp_path: Path
) -> None:
    home = tmp_path / "ws"
    w = make_ws(home)
    ok(w.document_index("CREATE_INDEX", index_name="kb"))
    ok(w.document_index("ADD_TEXT", index_name="kb", text="Some text.", filepath="a.txt"))
    ok(w.build_embeddings())
    w.close()
    catalog.execute(home, "DELETE FROM workspace_state")
    w2 = make_ws(home, embedding_provider="none", embedding_model=None)
    before = snapshot(home)
    fails(
        w2.document_index("ADD_TEXT", index_name="kb", text="More text.", filepath="b.txt"),
        "embedding_not_configured",
    )
    fails(w2.document_index("SEARCH", query="text", mode="semantic"), "embedding_not_configured")
    assert snapshot(home) == before
    r = ok(w2.document_index("SEARCH", query="text"))
    assert (
        r["mode"] == "keyword" and r["Results"] and any("no embedding identity" in x for x in r["Warnings"])
    )
    assert ok(w2.document_index("GET_INDICES_STATS"))["Stats"]["kb"]["vectors"] == "unresolved"


# -- catch-up -----------------------------------------------------------------------------------


def _quiet(w: Workspace) -> None:
    """Stop the background embedder so the test decides when vectors catch up."""
    w.ctx.embedding_worker.close()


def test_unchanged_text_is_never_embedded_twice(make_ws: Callable[..., Workspace], kb_copy: Path) -> None:
    w = make_ws()
    _quiet(w)
    ok(w.document_index("CREATE_INDEX", index_name="kb"))
    ok(w.document_index("ADD_DOCUMENTS", index_name="kb", filepath=str(kb_copy / "docs")))
    first = ok(w.build_embeddings())
    n = ok(w.document_index("GET_INDICES_STATS"))["Stats"]["kb"]["chunk_count"]
    assert first["chunks_embedded"] == n > 0 and first["cost"]["texts"] == n and first["cost"]["tokens"] > 0
    assert ok(w.build_embeddings())["chunks_embedded"] == 0  # nothing pending
    # rename: same document, same chunks
    ok(
        w.document_index(
            "RENAME_DOCUMENT",
            index_name="kb",
            filepath="docs/runbooks/rotate-api-keys.md",
            new_filename="keys.md",
        )
    )
    assert ok(w.build_embeddings())["chunks_embedded"] == 0
    # delete and re-add: new document id, new chunk rows, same texts -> vectors copied, not embedded
    ok(w.document_index("DELETE_DOCUMENT", index_name="kb", filepath="docs/policies/password-policy.md"))
    ok(
        w.document_index(
            "ADD_DOCUMENTS",
            index_name="kb",
            filepath=str(kb_copy / "docs" / "policies" / "password-policy.md"),
        )
    )
    again = ok(w.build_embeddings())
    assert again["chunks_embedded"] == 0 and again["chunks_reused"] >= 1
    # the same text in another index reuses too
    ok(w.document_index("CREATE_INDEX", index_name="kb2"))
    ok(w.document_index("ADD_DOCUMENTS", index_name="kb2", filepath=str(kb_copy / "docs" / "runbooks")))
    other = ok(w.build_embeddings())
    assert other["chunks_embedded"] == 0 and other["chunks_reused"] >= 3
    total = ok(w.embeddings_status())
    assert total["pending_embeddings"] == 0
    assert collections(w)["hashing/h1"] == total["chunk_count"]  # removed chunks left the collection


def test_catch_up_is_idempotent_from_any_watermark(make_ws: Callable[..., Workspace], tmp_path: Path) -> None:
    w = make_ws()
    _quiet(w)
    ok(w.document_index("CREATE_INDEX", index_name="kb"))
    for i in range(5):
        ok(
            w.document_index(
                "ADD_TEXT",
                index_name="kb",
                text=f"Document number {i} talks about topic {i}.",
                filepath=f"{i}.txt",
            )
        )
    assert ok(w.build_embeddings())["chunks_embedded"] == 5
    with w.ctx.catalog.write() as conn:  # as if the process died before storing its watermark
        conn.execute("UPDATE watermarks SET seq = 0 WHERE name LIKE 'vectors:%'")
    redo = ok(w.build_embeddings())
    assert redo["chunks_embedded"] == 0 and redo["chunks_reused"] == 0
    assert collections(w) == {"hashing/h1": 5}


def test_force_rebuild_embeds_everything_again(make_ws: Callable[..., Workspace]) -> None:
    w = make_ws()
    _quiet(w)
    ok(w.document_index("CREATE_INDEX", index_name="kb"))
    ok(w.document_index("ADD_TEXT", index_name="kb", text="One text.", filepath="a.txt"))
    ok(w.document_index("ADD_TEXT", index_name="kb", text="Another text.", filepath="b.txt"))
    ok(w.build_embeddings())
    assert ok(w.build_embeddings(force=True))["chunks_embedded"] == 2
    assert collections(w) == {"hashing/h1": 2}


def test_cost_is_reported_and_logged_in_events(make_ws: Callable[..., Workspace], tmp_path: Path) -> None:
    w = make_ws()
    _quiet(w)
    ok(w.document_index("CREATE_INDEX", index_name="kb"))
    ok(
        w.document_index(
            "ADD_TEXT",
            index_name="kb",
            text="Costs are measured in texts, tokens and seconds.",
            filepath="a.txt",
        )
    )
    r = ok(w.build_embeddings())
    assert r["cost"]["texts"] == 1 and r["cost"]["tokens"] == 8 and r["cost"]["seconds"] >= 0
    rows = catalog.rows(tmp_path / "ws", "SELECT data FROM events WHERE kind = 'embedding' ORDER BY id")
    import json

    data = json.loads(rows[-1][0])
    assert (
        data["identity"] == "hashing/h1" and data["texts"] == 1 and data["tokens"] == 8 and "seconds" in data
    )
    assert ok(w.embeddings_status())["last_runs"][0]["embedded"] == 1


def test_clipped_chunks_are_counted_and_kept_whole(make_ws: Callable[..., Workspace]) -> None:
    w = make_ws(embedding_options={"max_input_tokens": 20})
    _quiet(w)
    ok(w.document_index("CREATE_INDEX", index_name="kb", chunk_strategy="one_chunk_per_doc"))
    long_text = " ".join(f"word{i}" for i in range(60)) + "."
    r = ok(w.document_index("ADD_TEXT", index_name="kb", text=long_text, filepath="long.txt"))
    assert any(
        "1 chunk(s) are longer than the embedding model's input window (20 tokens)" in x
        for x in r["Warnings"]
    )
    short = ok(w.document_index("ADD_TEXT", index_name="kb", text="short one", filepath="short.txt"))
    assert "Warnings" not in short
    built = ok(w.build_embeddings())
    assert built["chunks_clipped"] == 1 and built["cost"]["tokens"] == 20 + 2
    doc = ok(w.document_index("GET_DOCUMENT", index_name="kb", filepath="long.txt"))
    assert doc["Chunks"][0]["text"] == long_text
    hit = ok(w.document_index("SEARCH", query="word59", index_name="kb", mode="keyword"))["Results"][0]
    assert hit["filepath"] == "long.txt"


def test_background_thread_catches_up_and_stops_on_close(make_ws: Callable[..., Workspace]) -> None:
    w = make_ws()
    ok(w.document_index("CREATE_INDEX", index_name="kb"))
    ok(
        w.document_index(
            "ADD_TEXT", index_name="kb", text="Vectors arrive in the background.", filepath="a.txt"
        )
    )
    worker = w.ctx.embedding_worker
    wait_until(
        lambda: not ok(w.embeddings_status())["pending_embeddings"], timeout=20, what="no pending embeddings"
    )
    assert ok(w.embeddings_status())["pending_embeddings"] == 0
    assert collections(w) == {"hashing/h1": 1}
    assert worker.running and worker.last_error is None
    w.close()
    assert not worker.running


def test_background_errors_are_kept_not_raised(make_ws: Callable[..., Workspace], tmp_path: Path) -> None:
    home = tmp_path / "ws"
    w = make_ws(home)
    ok(w.document_index("CREATE_INDEX", index_name="kb"))
    ok(w.document_index("ADD_TEXT", index_name="kb", text="First.", filepath="a.txt"))
    ok(w.build_embeddings())
    w.close()
    # Same identity, other dims: the collection refuses the new fingerprint.
    w2 = make_ws(home, embedding_options={"dims": 64})
    ok(w2.document_index("ADD_TEXT", index_name="kb", text="Second.", filepath="b.txt"))
    r = fails(w2.build_embeddings(), "conflict")
    assert "hashing/h1@64" in r["Error"] and "hashing/h1@384" in r["Error"]
    wait_until(lambda: w2.ctx.embedding_worker.last_error, timeout=20, what="the background worker's error")
    assert w2.ctx.embedding_worker.last_error["code"] == "conflict"
    assert ok(w2.embeddings_status())["worker"]["last_error"]["code"] == "conflict"
    fails(w2.document_index("SEARCH", query="first", mode="semantic"), "conflict")
    assert ok(w2.document_index("SEARCH", query="first", mode="keyword"))["Results"]
