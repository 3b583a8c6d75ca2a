"""The HNSW search depth (Chroma's ``ef_search``) of gitkb's collections (part ann20).

Every collection gets ``[chroma] ef_search`` (default ``DEFAULT_EF_SEARCH``) when it is created and
when a process opens it; ``gitkb status`` reports it; a bad value is refused at the entry point before
anything is written. On a shared Chroma server (part ops21) a node sets it only when its value is new
for it, so nodes never overwrite each other's; a node whose value differs, or whose change Chroma
refused, says so in its status. Embedded Chroma always; a Chroma server when GITKB_TEST_CHROMA_HOST /
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


# -- two nodes of one workspace on one Chroma server (part ops21) ---------------------------------


def _node_toml(home: Path, catalog: str, ef: int, port: str | None = None) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "gitkb.toml").write_text(
        '[embedding]\nprovider = "hashing"\nmodel = "hashing-384"\n'
        f'[catalog]\nurl = "{catalog}"\n[chroma]\nhost = "{HOST}"\nport = {port or PORT}\nef_search = {ef}\n'
    )


def _status(home: Path) -> dict[str, Any]:
    res = CliRunner().invoke(cli, ["--home", str(home), "--json", "status"])
    assert res.exit_code == 0, res.output
    return dict(json.loads(res.stdout))


needs_server = pytest.mark.skipif(
    not (HOST and PORT), reason="set GITKB_TEST_CHROMA_HOST and GITKB_TEST_CHROMA_PORT (a Chroma server)"
)


@needs_server
def test_two_nodes_on_one_chroma_server_do_not_overwrite_each_others_ef_search(tmp_path: Path) -> None:
    """Node a (ef 150) builds the collection; node b (ef 250) opening it keeps 150 (it no longer
    overwrites a's value) and says so in its status; a's status is clean. A node whose value changes
    (b: 250 -> 300) sets it, and then a says so. Restarts with an unchanged value flip nothing."""
    catalog = f"sqlite:///{tmp_path / 'shared' / 'catalog.sqlite3'}"
    (tmp_path / "shared").mkdir()
    a_home, b_home = tmp_path / "a", tmp_path / "b"
    _node_toml(a_home, catalog, 150)
    _node_toml(b_home, catalog, 250)
    a = Workspace(a_home)
    try:
        _fill(a)
        name = a.ctx.vectors.collection_name(IDENTITY)
        assert _configured(a.ctx.vectors, IDENTITY) == 150
        with Workspace(b_home) as b:
            assert ok(b.document_index("SEARCH", index_name="notes", query="aurora", mode="semantic"))[
                "Results"
            ]
            assert _configured(b.ctx.vectors, IDENTITY) == 150  # b did not overwrite a's value
            st = ok(b.get_index_status())
            assert st["vectors"] == {"ef_search": 250, "ef_search_in_use": {name: 150}}, st["vectors"]
            assert any(
                f"{name} searches at ef_search 150" in w and "ef_search 250" in w for w in st["Warnings"]
            )
        assert _status(b_home)["vectors"]["ef_search_in_use"] == {name: 150}  # the CLI, a fresh process
        assert "Warnings" not in ok(a.get_index_status()) and ok(a.get_index_status())["vectors"] == {
            "ef_search": 150
        }
        _node_toml(b_home, catalog, 300)  # b's operator changes b's value: b sets it
        with Workspace(b_home) as b:
            assert ok(b.document_index("SEARCH", index_name="notes", query="aurora", mode="semantic"))[
                "Results"
            ]
            assert _configured(b.ctx.vectors, IDENTITY) == 300
            assert "Warnings" not in ok(b.get_index_status())
        st = ok(a.get_index_status())  # a, still running, sees it
        assert st["vectors"]["ef_search_in_use"] == {name: 300} and "ef_search 150" in st["Warnings"][0]
        a.close()
        with Workspace(a_home) as a2:  # a restarts with its value unchanged: nothing flips back
            assert ok(a2.document_index("SEARCH", index_name="notes", query="aurora", mode="semantic"))[
                "Results"
            ]
            assert _configured(a2.ctx.vectors, IDENTITY) == 300
        with Workspace(b_home) as b:  # nor does b's restart
            assert ok(b.document_index("SEARCH", index_name="notes", query="aurora", mode="semantic"))[
                "Results"
            ]
            assert _configured(b.ctx.vectors, IDENTITY) == 300
            b.ctx.vectors.drop_collection(IDENTITY)
    finally:
        a.close()


class _ReadOnlyChroma:
    """The network edge of a read-only token: a proxy to the test's Chroma server that forwards every
    request but refuses a collection's modification (PUT) with 403, as an authorising server would."""

    def __init__(self) -> None:
        import http.client
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _forward(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.command == "PUT":
                    out = json.dumps({"error": "AuthorizationError", "message": "read-only token"}).encode()
                    self.send_response(403)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(out)))
                    self.end_headers()
                    self.wfile.write(out)
                    return
                up = http.client.HTTPConnection(str(HOST), int(str(PORT)), timeout=30)
                skip = {"host", "connection", "content-length", "transfer-encoding"}
                headers = {k: v for k, v in self.headers.items() if k.lower() not in skip}
                up.request(self.command, self.path, body=body or None, headers=headers)
                resp = up.getresponse()
                data = resp.read()
                self.send_response(resp.status)
                for k, v in resp.getheaders():
                    if k.lower() not in skip:
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                up.close()

            do_GET = do_POST = do_PUT = do_DELETE = _forward

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = str(self.server.server_address[1])
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@needs_server
def test_a_refused_ef_search_change_reaches_status_as_a_warning(tmp_path: Path) -> None:
    """A node's new ef_search that Chroma refuses to set (a read-only token) is not only logged: its
    status says which collection keeps which depth and why; the next start tries again."""
    catalog = f"sqlite:///{tmp_path / 'catalog.sqlite3'}"
    home = tmp_path / "node"
    proxy = _ReadOnlyChroma()
    try:
        _node_toml(home, catalog, 150)
        with Workspace(home) as w:
            _fill(w)  # created through the proxy (a POST): 150
            name = w.ctx.vectors.collection_name(IDENTITY)
        _node_toml(home, catalog, 250, port=proxy.port)
        with Workspace(home) as w:
            assert ok(w.document_index("SEARCH", index_name="notes", query="aurora", mode="semantic"))[
                "Results"
            ]
            assert _configured(w.ctx.vectors, IDENTITY) == 150
            st = ok(w.get_index_status())
            assert st["vectors"] == {"ef_search": 250, "ef_search_in_use": {name: 150}}, st["vectors"]
            assert len(st["Warnings"]) == 1 and "setting ef_search 250 was refused" in st["Warnings"][0], st
        res = CliRunner().invoke(cli, ["--home", str(home), "status"])  # the CLI prints it (stderr)
        assert res.exit_code == 0 and "ef_search 250" in res.stderr and "refused" in res.stderr, res.output
        _node_toml(home, catalog, 250)  # the next start, with a token that may: it applies it
        with Workspace(home) as w:
            assert ok(w.document_index("SEARCH", index_name="notes", query="aurora", mode="semantic"))[
                "Results"
            ]
            assert _configured(w.ctx.vectors, IDENTITY) == 250
            assert "Warnings" not in ok(w.get_index_status())
            w.ctx.vectors.drop_collection(IDENTITY)
    finally:
        proxy.close()


def test_status_with_the_chroma_server_away_warns_instead_of_failing(tmp_path: Path) -> None:
    """``gitkb status`` reads the collections' ef_search from a shared server: when the server cannot
    be reached it still answers, with a warning saying so."""
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    home = tmp_path / "away"
    home.mkdir()
    (home / "gitkb.toml").write_text(
        f'[embedding]\nprovider = "hashing"\nmodel = "hashing-384"\n[chroma]\nhost = "127.0.0.1"\nport = {port}\n'
    )
    with Workspace(home) as w:
        ok(w.document_index("CREATE_INDEX", index_name="notes"))
        st = ok(w.get_index_status())
        assert st["vectors"] == {"ef_search": DEFAULT_EF_SEARCH}
        assert any("could not read the vector collections' ef_search" in x for x in st["Warnings"]), st
