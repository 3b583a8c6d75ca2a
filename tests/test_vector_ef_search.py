"""The HNSW search depth (Chroma's ``ef_search``) of gitkb's collections (part ann20).

Every collection gets ``[chroma] ef_search`` (default ``DEFAULT_EF_SEARCH``) when it is created and
when a process opens it; ``gitkb status`` reports it; a bad value is refused at the entry point before
anything is written. Embedded Chroma always; a Chroma server when GITKB_TEST_CHROMA_HOST /
GITKB_TEST_CHROMA_PORT are set (``bash scripts/test`` starts one).
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from gitkb import Workspace
from gitkb.cli.main import cli
from gitkb.core.config import DEFAULT_EF_SEARCH, load_settings
from gitkb.core.errors import InvalidArgument
from gitkb.stores.vectors import VectorStore
from helpers import ok

HOST = os.environ.get("GITKB_TEST_CHROMA_HOST")
PORT = os.environ.get("GITKB_TEST_CHROMA_PORT")
IDENTITY = "hashing/hashing-384"


@pytest.fixture(params=["persistent", "http"])
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[..., VectorStore]:
    """``opener(ef_search=...)`` opens a VectorStore on the same storage each time."""
    if request.param == "persistent":
        return lambda **kw: VectorStore.open_persistent(tmp_path / "vectors", **kw)
    if not (HOST and PORT):
        pytest.skip("set GITKB_TEST_CHROMA_HOST and GITKB_TEST_CHROMA_PORT to test against a Chroma server")
    return lambda **kw: VectorStore.open_http(HOST, int(PORT), **kw)


def _configured(store: VectorStore, identity: str) -> Any:
    """The ef_search Chroma records for ``identity``'s collection, read through a fresh handle."""
    col = store._client.get_collection(store.collection_name(identity))
    return col.configuration_json["hnsw"]["ef_search"]


def _random(n: int, dims: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, dims)).astype(np.float32)


def test_collections_get_the_configured_ef_search_new_and_existing(
    opener: Callable[..., VectorStore],
) -> None:
    identity = f"hashing/t-{uuid.uuid4().hex[:10]}"
    vecs = _random(3, 8, 1).tolist()
    first = opener()
    try:
        first.upsert(f"{identity}@8", ["a", "b", "c"], vecs)
        assert first.ef_search == DEFAULT_EF_SEARCH != 100  # deeper than Chroma's own default
        assert _configured(first, identity) == DEFAULT_EF_SEARCH
    finally:
        first.close()
    second = opener(ef_search=321)  # an existing collection: set when this store opens it
    try:
        assert second.query(identity, vecs[0], 1)[0][0] == "a"
        assert _configured(second, identity) == 321
        listed = [c for c in second.list_collections() if c["identity"] == identity]
        assert [c["ef_search"] for c in listed] == [321]
        other = f"hashing/t-{uuid.uuid4().hex[:10]}"  # a new collection: created with it
        second.upsert(f"{other}@8", ["x"], vecs[:1])
        assert _configured(second, other) == 321
        second.drop_collection(other)
    finally:
        second.drop_collection(identity)
        second.close()


@pytest.mark.parametrize("bad", [0, -5, 10_001, True, "200", 1.5])
def test_a_store_refuses_a_bad_ef_search(tmp_path: Path, bad: Any) -> None:
    with pytest.raises(InvalidArgument, match="ef_search must be an integer from 1 to"):
        VectorStore.open_persistent(tmp_path / "vectors", ef_search=bad)
    assert not (tmp_path / "vectors").exists()


def test_a_deeper_search_finds_the_neighbours_ef_10_misses(tmp_path: Path) -> None:
    """Real HNSW: 3,000 random 64-dim vectors (no structure to follow), 50 queries, k = 10. At ef 10
    the graph walk stops early (recall about 0.5); at 400 it finds (nearly) all of the exact top 10.
    The same collection, built at 10, is searched at 400 once a store opens it with 400."""
    n, dims, k = 3000, 64, 10
    data, queries = _random(n, dims, 0), _random(50, dims, 1)
    unit = data / np.linalg.norm(data, axis=1, keepdims=True)
    truth = np.argsort(-(queries @ unit.T), axis=1)[:, :k]
    ids = [str(i) for i in range(n)]

    def recall(store: VectorStore) -> float:
        found = [{int(v) for v, _ in store.query("hashing/synthetic", q.tolist(), k)} for q in queries]
        return float(np.mean([len(f & set(t)) / k for f, t in zip(found, truth, strict=True)]))

    with VectorStore.open_persistent(tmp_path / "v", ef_search=10) as shallow:
        shallow.upsert(f"hashing/synthetic@{dims}", ids, data.tolist())
        low = recall(shallow)
    with VectorStore.open_persistent(tmp_path / "v", ef_search=400) as deep:
        high = recall(deep)
    assert low < 0.8 and high >= 0.97, (low, high)


def _toml(home: Path, chroma: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    server = f'host = "{HOST}"\nport = {PORT}\n' if HOST and PORT else ""
    (home / "gitkb.toml").write_text(
        f'[embedding]\nprovider = "hashing"\nmodel = "hashing-384"\n[chroma]\n{server}{chroma}'
    )


def _fill(w: Workspace) -> None:
    ok(w.document_index("CREATE_INDEX", index_name="notes"))
    ok(
        w.document_index(
            "ADD_TEXT", index_name="notes", text="# Aurora\n\nThe aurora runbook.\n", filepath="a.md"
        )
    )
    ok(w.build_embeddings())


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    """A home whose collection is on the test's Chroma server when one is given (else embedded)."""
    h = tmp_path / "home"
    yield h
    if HOST and PORT and (h / "catalog.sqlite3").exists():
        with Workspace(h) as w:
            w.ctx.vectors.drop_collection(IDENTITY)


def test_gitkb_toml_sets_the_workspace_collections_ef_search_and_status_shows_it(home: Path) -> None:
    _toml(home, "ef_search = 150\n")
    with Workspace(home) as w:
        _fill(w)
        assert _configured(w.ctx.vectors, IDENTITY) == 150
        assert ok(w.get_index_status())["vectors"] == {"ef_search": 150}
        assert [c["ef_search"] for c in ok(w.embeddings_status())["collections"]] == [150]
    _toml(home, "")  # the setting removed: the default, on the existing collection too
    with Workspace(home) as w:
        assert ok(w.document_index("SEARCH", index_name="notes", query="aurora", mode="semantic"))["Results"]
        assert _configured(w.ctx.vectors, IDENTITY) == DEFAULT_EF_SEARCH
    res = CliRunner().invoke(cli, ["--home", str(home), "--json", "status"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["vectors"] == {"ef_search": DEFAULT_EF_SEARCH}


@pytest.mark.parametrize("bad", ["0", "20000", '"deep"', "true", "1.5", "-1"])
def test_a_bad_ef_search_in_gitkb_toml_is_refused_with_nothing_written(home: Path, bad: str) -> None:
    _toml(home, "ef_search = 150\n")
    with Workspace(home) as w:
        _fill(w)
    catalog = (home / "catalog.sqlite3").read_bytes()
    _toml(home, f"ef_search = {bad}\n")
    with pytest.raises(InvalidArgument, match=r"gitkb\.toml: \[chroma\] ef_search must be an integer from 1"):
        load_settings(home)
    res = CliRunner().invoke(cli, ["--home", str(home), "--json", "status"])
    assert res.exit_code != 0
    assert "invalid_argument" in res.output and "gitkb.toml" in res.output and "ef_search" in res.output
    assert (home / "catalog.sqlite3").read_bytes() == catalog
    _toml(home, "ef_search = 150\n")
    with Workspace(home) as w:
        assert _configured(w.ctx.vectors, IDENTITY) == 150  # the refused value reached no collection


def test_a_bad_ef_search_in_the_environment_is_refused(tmp_path: Path) -> None:
    for bad in ("0", "deep", "99999"):
        with pytest.raises(InvalidArgument, match="GITKB_CHROMA_EF_SEARCH must be an integer"):
            load_settings(tmp_path, env={"GITKB_CHROMA_EF_SEARCH": bad})
    assert load_settings(tmp_path, env={"GITKB_CHROMA_EF_SEARCH": "64"}).chroma_ef_search == 64
