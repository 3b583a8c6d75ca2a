"""The Chroma vector store: embedded (PersistentClient) always; a Chroma server when
GITKB_TEST_CHROMA_HOST / GITKB_TEST_CHROMA_PORT are set (e.g. ``chroma run --path X --port P``)."""

from __future__ import annotations

import os
import re
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gitkb.core.config import DEFAULT_EF_SEARCH
from gitkb.core.embedders.hashing import HashingEmbedder
from gitkb.core.errors import Conflict, InvalidArgument, StoreUnavailable
from gitkb.stores.vector_collections import collection_name
from gitkb.stores.vectors import UPSERT_BATCH, VectorStore

HOST = os.environ.get("GITKB_TEST_CHROMA_HOST")
PORT = os.environ.get("GITKB_TEST_CHROMA_PORT")
DIMS = 32
EMB = HashingEmbedder(dims=DIMS)


def _no_remote_network(mp: pytest.MonkeyPatch) -> None:
    """Chroma must never reach beyond loopback (no telemetry, no model download)."""
    real_connect = socket.socket.connect

    def connect(self: socket.socket, address: Any) -> Any:
        host = address[0] if isinstance(address, tuple) else ""
        if self.family == socket.AF_UNIX or host in {"localhost", "::1"} or str(host).startswith("127."):
            return real_connect(self, address)
        raise AssertionError(f"network access attempted: {address!r}")

    mp.setattr(socket.socket, "connect", connect)


@pytest.fixture(params=["persistent", "http"])
def backend(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[str, Any]]:
    """``(kind, opener)``: ``opener()`` opens a VectorStore on the same underlying storage."""
    _no_remote_network(monkeypatch)
    if request.param == "persistent":
        path = tmp_path / "vectors"
        yield "persistent", lambda: VectorStore.open_persistent(path)
    else:
        if not (HOST and PORT):
            pytest.skip(
                "set GITKB_TEST_CHROMA_HOST and GITKB_TEST_CHROMA_PORT to test against a Chroma server"
            )
        yield "http", lambda: VectorStore.open_http(HOST, int(PORT))


@pytest.fixture
def store(backend: tuple[str, Any]) -> Iterator[VectorStore]:
    s = backend[1]()
    yield s
    s.close()


@pytest.fixture
def ident(store: VectorStore) -> Iterator[str]:
    """A fresh identity per test, so tests never share a collection on a shared server."""
    identity = f"hashing/t-{uuid.uuid4().hex[:10]}"
    yield identity
    store.drop_collection(identity)


def _fp(identity: str, dims: int = DIMS) -> str:
    return f"{identity}@{dims}"


def _vecs(texts: list[str]) -> list[list[float]]:
    return EMB.embed_batch(texts)


def _meta(index_id: str, doc: str, content_hash: str) -> dict[str, Any]:
    return {"index_id": index_id, "document_id": doc, "content_hash": content_hash}


# ---------------------------------------------------------------------------------------------
# naming


def test_collection_name_is_pure_and_valid() -> None:
    assert collection_name("fastembed/all-minilm-l6-v2") == "fastembed_all-minilm-l6-v2_index"
    assert collection_name("FastEmbed/FASTEMBED/All-MiniLM-L6-v2") == "fastembed_all-minilm-l6-v2_index"
    assert (
        collection_name("fastembed/sentence-transformers/all-MiniLM-L6-v2")
        == "fastembed_all-minilm-l6-v2_index"
    )
    rule = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9._-]{1,510}[a-zA-Z0-9]$")
    names = {
        collection_name(i)
        for i in (
            "openai/nomic-ai/nomic-embed-text-v1.5",
            "openai/nomic-ai-nomic-embed-text-v1.5",
            "openai/nomic-embed-text:latest",
            "openai/a..b",
            "openai/" + "x" * 250,
            "openai/a+b",
            "hashing/x",
        )
    }
    assert len(names) == 7
    for name in names:
        assert rule.match(name) and ".." not in name and len(name) <= 512, name
    assert collection_name("openai/nomic-embed-text:latest").startswith("openai_nomic-embed-text-latest-")
    with pytest.raises(InvalidArgument):
        collection_name("no-slash")


def test_a_query_names_its_collection_once_and_a_new_naming_names_it_anew(
    store: VectorStore, ident: str
) -> None:
    """Every search asks the store for its identity's collection: the name is worked out once per
    (naming, identity), and a workspace that takes a new id (``use_naming``) finds its own."""
    from gitkb.stores import vector_collections
    from gitkb.stores.vector_collections import Naming

    store.use_naming(Naming.of("aaaa"))
    store.upsert(_fp(ident), ["1"], _vecs(["one"]), [_meta("i", "d", "h1")])
    vector_collections._named.cache_clear()
    for _ in range(3):
        assert [vid for vid, _ in store.query(ident, _vecs(["one"])[0], 1)] == ["1"]
    info = vector_collections._named.cache_info()
    assert (info.misses, info.hits) == (1, 5)  # two asks per query (the handle, then the call)
    store.use_naming(Naming.of("bbbb"))
    assert store.query(ident, _vecs(["one"])[0], 1) == [] and store.collection_name(ident).endswith("_bbbb")
    store.drop_collection(ident)
    store.use_naming(Naming.of("aaaa"))
    assert [vid for vid, _ in store.query(ident, _vecs(["one"])[0], 1)] == ["1"]


# ---------------------------------------------------------------------------------------------
# writes and reads


def test_upsert_get_count_and_metadata(store: VectorStore, ident: str) -> None:
    texts = ["alpha beta", "gamma delta", "epsilon"]
    n = store.upsert(
        _fp(ident),
        ["c1", "c2", "c3"],
        _vecs(texts),
        [_meta("docs", "d1", "h1"), _meta("docs", "d1", "h2"), _meta("other", "d2", "h3")],
    )
    assert n == 3
    assert store.count(ident) == 3
    assert store.count(ident, {"index_id": "docs"}) == 2
    assert store.count(ident, {"index_id": "docs", "document_id": "d1"}) == 2
    got = store.get_vectors(ident, ["c1", "c3", "missing"])
    assert set(got) == {"c1", "c3"}
    assert np.allclose(got["c1"], _vecs(["alpha beta"])[0], atol=1e-6)
    assert store.fingerprint_of(ident) == _fp(ident)
    assert store.ids_in(ident, {"index_id": "other"}) == {"c3"}
    assert store.ids_in(ident) == {"c1", "c2", "c3"}
    # every vector carries the fingerprint
    assert store.ids_in(ident, {"fingerprint": _fp(ident)}) == {"c1", "c2", "c3"}
    # idempotent by id
    store.upsert(_fp(ident), ["c1"], _vecs(["changed"]), [_meta("docs", "d1", "h9")])
    assert store.count(ident) == 3
    assert np.allclose(store.get_vectors(ident, ["c1"])["c1"], _vecs(["changed"])[0], atol=1e-6)


def test_collection_metadata_and_listing(store: VectorStore, ident: str) -> None:
    store.upsert(_fp(ident), ["a"], _vecs(["x"]), [_meta("i", "d", "h")])
    listed = [c for c in store.list_collections() if c["identity"] == ident]
    assert listed == [
        {
            "name": collection_name(ident),
            "identity": ident,
            "fingerprint": _fp(ident),
            "count": 1,
            "ef_search": DEFAULT_EF_SEARCH,
        }
    ]
    col = store._client.get_collection(collection_name(ident), embedding_function=None)
    assert col.metadata["hnsw:space"] == "cosine"
    assert col.configuration_json["hnsw"]["space"] == "cosine"
    assert col.metadata["dims"] == DIMS
    assert col.metadata["fingerprint"] == _fp(ident)
    assert store.drop_collection(ident) is True
    assert store.drop_collection(ident) is False
    assert store.count(ident) == 0
    assert store.fingerprint_of(ident) is None


def test_fingerprint_refusal(store: VectorStore, ident: str) -> None:
    store.upsert(_fp(ident), ["a"], _vecs(["x"]), [_meta("i", "d", "h")])
    other = HashingEmbedder(dims=16).embed_batch(["x"])
    with pytest.raises(Conflict) as info:
        store.upsert(_fp(ident, 16), ["b"], other, [_meta("i", "d", "h")])
    assert _fp(ident) in info.value.message and _fp(ident, 16) in info.value.message
    # a vector whose size disagrees with the fingerprint it claims
    with pytest.raises(Conflict) as info:
        store.upsert(_fp(ident), ["b"], other, [_meta("i", "d", "h")])
    assert _fp(ident) in info.value.message and _fp(ident, 16) in info.value.message
    # metadata claiming another fingerprint
    with pytest.raises(Conflict):
        store.upsert(_fp(ident), ["b"], _vecs(["y"]), [{"fingerprint": "hashing/other@32"}])
    with pytest.raises(Conflict):
        store.query(ident, other[0], 3)
    assert store.count(ident) == 1


def test_upsert_refuses_mismatched_duplicate_nan_or_list_metadata(store: VectorStore, ident: str) -> None:
    with pytest.raises(InvalidArgument):
        store.upsert(_fp(ident), ["a", "b"], _vecs(["x"]), [{}])
    with pytest.raises(InvalidArgument):
        store.upsert(_fp(ident), ["a", "a"], _vecs(["x", "y"]), [{}, {}])
    with pytest.raises(InvalidArgument):
        store.upsert(_fp(ident), ["a"], [[float("nan")] * DIMS], [{}])
    with pytest.raises(InvalidArgument):
        store.upsert(_fp(ident), ["a"], _vecs(["x"]), [{"tags": ["a", "b"]}])
    with pytest.raises(InvalidArgument):
        store.upsert("not-a-fingerprint", ["a"], _vecs(["x"]), [{}])
    assert store.upsert(_fp(ident), [], [], []) == 0
    # None metadata values are dropped; missing metadatas still get the fingerprint
    store.upsert(_fp(ident), ["a", "b"], _vecs(["x", "y"]), [{"tenant": None}, {}])
    store.upsert(_fp(ident), ["c"], _vecs(["z"]))
    assert store.ids_in(ident, {"fingerprint": _fp(ident)}) == {"a", "b", "c"}


def test_batches_of_64(store: VectorStore, ident: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from chromadb.api.models.Collection import Collection

    sizes: list[int] = []
    real = Collection.upsert

    def spy(self: Any, *args: Any, **kw: Any) -> Any:
        sizes.append(len(kw["ids"]))
        return real(self, *args, **kw)

    monkeypatch.setattr(Collection, "upsert", spy)
    ids = [f"chunk-{i:03d}" for i in range(150)]
    texts = [f"chunk number {i} talks about topic {i % 7}" for i in range(150)]
    store.upsert(_fp(ident), ids, _vecs(texts), [_meta(f"idx{i % 3}", f"d{i}", f"h{i}") for i in range(150)])
    assert sizes == [UPSERT_BATCH, UPSERT_BATCH, 150 - 2 * UPSERT_BATCH]
    assert store.count(ident) == 150
    assert len(store.get_vectors(ident, ids)) == 150


def test_delete_and_delete_where(store: VectorStore, ident: str) -> None:
    ids = [f"c{i}" for i in range(10)]
    store.upsert(
        _fp(ident),
        ids,
        _vecs([f"text {i}" for i in range(10)]),
        [_meta("keep" if i % 2 else "drop", f"d{i}", f"h{i}") for i in range(10)],
    )
    assert store.delete_where(ident, {"index_id": "drop"}) == 5
    assert store.ids_in(ident) == {f"c{i}" for i in range(1, 10, 2)}
    assert store.delete_where(ident, {"index_id": "drop"}) == 0
    store.delete(ident, ["c1", "c3", "never-there"])
    assert store.ids_in(ident) == {"c5", "c7", "c9"}
    with pytest.raises(InvalidArgument):
        store.delete_where(ident, {})
    # a missing collection is simply empty
    assert store.delete_where("hashing/absent-" + uuid.uuid4().hex[:6], {"index_id": "x"}) == 0
    store.delete("hashing/absent-" + uuid.uuid4().hex[:6], ["a"])


def test_query_filtered_by_index(store: VectorStore, ident: str) -> None:
    texts = {
        "a1": ("alpha", "password reset for admin accounts"),
        "a2": ("alpha", "bananas and apples in the kitchen"),
        "b1": ("beta", "password reset for admin users"),
        "c1": ("gamma", "admin password reset procedure"),
    }
    ids = list(texts)
    store.upsert(
        _fp(ident),
        ids,
        _vecs([t for _, t in texts.values()]),
        [_meta(ix, f"doc-{i}", f"h-{i}") for i, (ix, _) in texts.items()],
    )
    q = _vecs(["reset admin password"])[0]
    everything = store.query(ident, q, 10)
    assert {i for i, _ in everything} == set(ids)
    distances = [d for _, d in everything]
    assert distances == sorted(distances)
    assert everything[-1][0] == "a2"
    assert [i for i, _ in store.query(ident, q, 10, index_ids=["alpha"])] == ["a1", "a2"]
    assert {i for i, _ in store.query(ident, q, 10, index_ids=["alpha", "beta"])} == {"a1", "a2", "b1"}
    assert store.query(ident, q, 1, index_ids=["beta", "gamma"])[0][0] in {"b1", "c1"}
    assert store.query(ident, q, 10, index_ids=[]) == []  # never widened
    assert [
        i for i, _ in store.query(ident, q, 10, index_ids=["alpha"], where={"document_id": "doc-a2"})
    ] == ["a2"]
    assert store.query(ident, q, 10, index_ids=["nope"]) == []
    assert store.query("hashing/absent-" + uuid.uuid4().hex[:6], q, 5) == []
    with pytest.raises(InvalidArgument):
        store.query(ident, q, 0)


def test_find_by_content_hash(store: VectorStore, ident: str) -> None:
    vecs = _vecs(["one", "two", "three"])
    store.upsert(
        _fp(ident),
        ["x1", "x2", "x3"],
        vecs,
        [_meta("i", "d1", "hash-1"), _meta("i", "d1", "hash-2"), _meta("j", "d2", "hash-1")],
    )
    found = store.find_by_content_hash(ident, ["hash-1", "hash-2", "hash-404", ""])
    assert set(found) == {"hash-1", "hash-2"}
    assert np.allclose(found["hash-2"], vecs[1], atol=1e-6)
    assert any(np.allclose(found["hash-1"], v, atol=1e-6) for v in (vecs[0], vecs[2]))
    assert store.find_by_content_hash(ident, []) == {}
    assert store.find_by_content_hash("hashing/absent-" + uuid.uuid4().hex[:6], ["hash-1"]) == {}


def test_reopen_persists(backend: tuple[str, Any]) -> None:
    _, opener = backend
    identity = f"hashing/t-{uuid.uuid4().hex[:10]}"
    first = opener()
    vecs = _vecs(["persist me", "and me"])
    first.upsert(_fp(identity), ["p1", "p2"], vecs, [_meta("i", "d", "h1"), _meta("i", "d", "h2")])
    first.close()
    second = opener()
    try:
        assert second.count(identity) == 2
        assert second.fingerprint_of(identity) == _fp(identity)
        assert np.allclose(second.get_vectors(identity, ["p2"])["p2"], vecs[1], atol=1e-6)
        assert second.query(identity, vecs[0], 1)[0][0] == "p1"
        with pytest.raises(Conflict):
            second.upsert(_fp(identity, 16), ["p3"], HashingEmbedder(dims=16).embed_batch(["x"]), [{}])
    finally:
        second.drop_collection(identity)
        second.close()


def test_stale_collection_handle_is_refetched(backend: tuple[str, Any]) -> None:
    _, opener = backend
    identity = f"hashing/t-{uuid.uuid4().hex[:10]}"
    a = opener()
    b = opener()
    try:
        a.upsert(_fp(identity), ["x"], _vecs(["x"]), [{}])
        assert b.count(identity) == 1  # b caches the handle
        a.drop_collection(identity)
        a.upsert(_fp(identity), ["y", "z"], _vecs(["y", "z"]), [{}, {}])  # a new collection, new id
        assert b.count(identity) == 2
        assert b.ids_in(identity) == {"y", "z"}
        a.drop_collection(identity)
        b.upsert(_fp(identity), ["w"], _vecs(["w"]), [{}])  # b's handle is stale: the write must not be lost
        assert a.ids_in(identity) == {"w"}
    finally:
        a.drop_collection(identity)
        a.close()
        b.close()


def test_foreign_collection_with_our_name_is_refused(store: VectorStore, ident: str) -> None:
    store._client.create_collection(
        collection_name(ident), metadata={"identity": "someone/else"}, embedding_function=None
    )
    with pytest.raises(Conflict):
        store.upsert(_fp(ident), ["a"], _vecs(["x"]), [{}])
    store._client.delete_collection(collection_name(ident))


def test_unreachable_server_is_store_unavailable() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(StoreUnavailable):
        VectorStore.open_http("127.0.0.1", port)


def test_unwritable_path_is_store_unavailable(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(StoreUnavailable):
        VectorStore.open_persistent(blocker / "vectors")
