"""Embedders: identity normalisation, registry, hashing, offline fastembed MiniLM, OpenAI-compatible."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gitkb.core.embedders import (
    Embedder,
    count_tokens,
    create_embedder,
    embed_with_cost,
    fingerprint,
    make_fingerprint,
    normalize_identity,
    parse_fingerprint,
    resolve_identity,
    split_identity,
)
from gitkb.core.embedders.fastembed_minilm import (
    MODEL_DIR_NAME,
    TOKENIZER_FILES,
    assemble_model_dir,
    packaged_model_file,
)
from gitkb.core.embedders.hashing import HashingEmbedder
from gitkb.core.errors import EmbeddingNotConfigured, InvalidArgument, StoreUnavailable

# ---------------------------------------------------------------------------------------------
# network guards


class NetworkBlocked(AssertionError):
    pass


def _is_loopback(address: Any) -> bool:
    host = address[0] if isinstance(address, tuple) else address
    return isinstance(host, str) and (host in {"localhost", "::1"} or host.startswith("127."))


def _install_guard(mp: pytest.MonkeyPatch, *, allow_loopback: bool) -> None:
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex
    real_getaddrinfo = socket.getaddrinfo

    def connect(self: socket.socket, address: Any) -> Any:
        if allow_loopback and (self.family == socket.AF_UNIX or _is_loopback(address)):
            return real_connect(self, address)
        raise NetworkBlocked(f"network access attempted: connect {address!r}")

    def connect_ex(self: socket.socket, address: Any) -> Any:
        if allow_loopback and (self.family == socket.AF_UNIX or _is_loopback(address)):
            return real_connect_ex(self, address)
        raise NetworkBlocked(f"network access attempted: connect_ex {address!r}")

    def getaddrinfo(host: Any, *args: Any, **kw: Any) -> Any:
        if allow_loopback and _is_loopback(host):
            return real_getaddrinfo(host, *args, **kw)
        raise NetworkBlocked(f"network access attempted: getaddrinfo {host!r}")

    mp.setattr(socket.socket, "connect", connect)
    mp.setattr(socket.socket, "connect_ex", connect_ex)
    mp.setattr(socket, "getaddrinfo", getaddrinfo)
    mp.setenv("HF_HUB_OFFLINE", "1")


def _cos(a: list[float], b: list[float]) -> float:
    va, vb = np.asarray(a), np.asarray(b)
    return float(va @ vb / (np.linalg.norm(va) * np.linalg.norm(vb)))


# ---------------------------------------------------------------------------------------------
# identity


@pytest.mark.parametrize(
    ("provider", "model", "expected"),
    [
        ("FastEmbed", "fastembed/All-MiniLM-L6-v2", "fastembed/all-minilm-l6-v2"),
        ("fastembed", "all-minilm-l6-v2", "fastembed/all-minilm-l6-v2"),
        ("  fastembed ", "  ALL-MiniLM-L6-v2  ", "fastembed/all-minilm-l6-v2"),
        ("fastembed", "sentence-transformers/all-MiniLM-L6-v2", "fastembed/all-minilm-l6-v2"),
        ("fastembed", "FASTEMBED/sentence-transformers/all-MiniLM-L6-v2", "fastembed/all-minilm-l6-v2"),
        ("openai", "OpenAI/text-embedding-3-small", "openai/text-embedding-3-small"),
        ("openai", "nomic-ai/nomic-embed-text-v1.5", "openai/nomic-ai/nomic-embed-text-v1.5"),
        ("hashing", "feature-hash-v1", "hashing/feature-hash-v1"),
    ],
)
def test_normalize_identity(provider: str, model: str, expected: str) -> None:
    assert normalize_identity(provider, model) == expected


def test_aliases_are_per_provider() -> None:
    # the sentence-transformers spelling is the fastembed model, but not another provider's
    assert normalize_identity("openai", "sentence-transformers/all-MiniLM-L6-v2") == (
        "openai/sentence-transformers/all-minilm-l6-v2"
    )


@pytest.mark.parametrize(
    ("provider", "model"),
    [
        ("", "x"),
        ("fastembed", ""),
        ("fastembed", "   "),
        ("fast embed", "x"),
        ("fastembed", "a b"),
        ("fastembed", "model@384"),
        ("fastembed", "fastembed/"),
        ("/x", "y"),
        ("fastembed", "a//b"),
    ],
)
def test_normalize_identity_rejects(provider: str, model: str) -> None:
    with pytest.raises(InvalidArgument):
        normalize_identity(provider, model)


def test_fingerprints() -> None:
    fp = make_fingerprint("FastEmbed/All-MiniLM-L6-v2", 384)
    assert fp == "fastembed/all-minilm-l6-v2@384"
    assert parse_fingerprint(fp) == ("fastembed/all-minilm-l6-v2", 384)
    assert split_identity("openai/nomic-ai/x") == ("openai", "nomic-ai/x")
    assert fingerprint(HashingEmbedder(dims=64)) == "hashing/feature-hash-v1@64"
    for bad in ("fastembed/x", "fastembed/x@", "fastembed/x@0", "x@3", "fastembed/x@-1"):
        with pytest.raises(InvalidArgument):
            parse_fingerprint(bad)
    with pytest.raises(InvalidArgument):
        make_fingerprint("fastembed/x", 0)


# ---------------------------------------------------------------------------------------------
# registry


@pytest.mark.parametrize(
    ("provider", "model"),
    [
        ("none", None),
        ("NONE", "all-minilm-l6-v2"),
        (None, None),
        ("", "x"),
        ("nosuch", "m"),
        ("openai", None),
        ("openai", "  "),
        ("fastembed", "bge-small-en"),
        ("bad provider!", "m"),
    ],
)
def test_create_embedder_not_configured(provider: str | None, model: str | None, tmp_path: Path) -> None:
    with pytest.raises(EmbeddingNotConfigured) as info:
        create_embedder(provider, model, cache_dir=tmp_path, options={})
    assert "GITKB_EMBEDDING_PROVIDER" in info.value.message or "GITKB_EMBEDDING_MODEL" in info.value.message
    assert info.value.code == "embedding_not_configured"


def test_resolve_identity_fills_default_model() -> None:
    assert resolve_identity("fastembed", None) == "fastembed/all-minilm-l6-v2"
    assert (
        resolve_identity("FastEmbed", "sentence-transformers/all-MiniLM-L6-v2")
        == "fastembed/all-minilm-l6-v2"
    )
    assert resolve_identity("hashing", "") == "hashing/feature-hash-v1"


def test_openai_without_base_url_is_not_configured(tmp_path: Path) -> None:
    with pytest.raises(EmbeddingNotConfigured, match="base_url"):
        create_embedder("openai", "text-embedding-3-small", cache_dir=tmp_path, options={})


def test_unknown_options_rejected(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument):
        create_embedder("hashing", None, cache_dir=tmp_path, options={"dimz": 3})


def test_importing_embedders_loads_no_heavy_library() -> None:
    code = (
        "import sys, pathlib\n"
        "from gitkb.core.embedders import create_embedder\n"
        "e = create_embedder('hashing', None, cache_dir=pathlib.Path('.'), options={'dims': 8})\n"
        "e.embed_batch(['x'])\n"
        "heavy = [m for m in ('fastembed', 'onnxruntime', 'chromadb', 'httpx') if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


# ---------------------------------------------------------------------------------------------
# hashing


def test_hashing_embedder(tmp_path: Path) -> None:
    e = create_embedder("hashing", None, cache_dir=tmp_path, options={})
    assert isinstance(e, Embedder)
    assert (e.identity, e.dims) == ("hashing/feature-hash-v1", 384)
    texts = [
        "reset the admin password",
        "how to reset a password for the admin user",
        "bananas are yellow fruit",
        "",
    ]
    vecs = e.embed_batch(texts)
    assert [len(v) for v in vecs] == [384] * 4
    assert np.allclose(np.linalg.norm(np.asarray(vecs), axis=1), 1.0)
    assert _cos(vecs[0], vecs[1]) > 0.3 > abs(_cos(vecs[0], vecs[2]))
    assert e.embed_batch(texts) == vecs  # deterministic
    assert e.embed_batch([]) == []


def test_hashing_is_stable_across_processes(tmp_path: Path) -> None:
    code = (
        "from gitkb.core.embedders.hashing import HashingEmbedder\n"
        "print(repr(HashingEmbedder(dims=16).embed_batch(['stable across processes'])[0]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert eval(out.stdout) == HashingEmbedder(dims=16).embed_batch(["stable across processes"])[0]


def test_hashing_dims_and_validation(tmp_path: Path) -> None:
    e = create_embedder("hashing", "my-hash", cache_dir=tmp_path, options={"dims": 64})
    assert fingerprint(e) == "hashing/my-hash@64"
    assert len(e.embed_batch(["a"])[0]) == 64
    with pytest.raises(InvalidArgument):
        HashingEmbedder(dims=0)
    with pytest.raises(InvalidArgument):
        e.embed_batch("not a list")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        e.embed_batch(["ok", 3])  # type: ignore[list-item]


def test_embed_with_cost_whitespace_fallback() -> None:
    class Plain:
        identity = "plain/x"
        dims = 2
        max_input_tokens = 3

        def embed_batch(self, texts: list[str]) -> list[list[float]]:
            return [[1.0, 0.0] for _ in texts]

    vecs, cost = embed_with_cost(Plain(), ["one two", "a b c d e"])
    assert vecs == [[1.0, 0.0], [1.0, 0.0]]
    assert (cost.texts, cost.tokens) == (2, 2 + 3)  # capped at max_input_tokens
    assert cost.seconds >= 0
    assert count_tokens(Plain(), ["x y z"]) == [3]


# ---------------------------------------------------------------------------------------------
# fastembed MiniLM, offline (the model loads once per module, with networking impossible)


@pytest.fixture(scope="module")
def minilm(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Assemble the model folder and load the model with networking impossible."""
    cache = tmp_path_factory.mktemp("embed-cache")
    with pytest.MonkeyPatch.context() as mp:
        _install_guard(mp, allow_loopback=False)
        with pytest.raises(NetworkBlocked):
            socket.create_connection(("huggingface.co", 443), timeout=1)
        assert os.environ["HF_HUB_OFFLINE"] == "1"
        return create_embedder(
            "FastEmbed", "sentence-transformers/all-MiniLM-L6-v2", cache_dir=cache, options={}
        )


@pytest.fixture
def offline(monkeypatch: pytest.MonkeyPatch) -> None:
    _install_guard(monkeypatch, allow_loopback=False)


def test_minilm_model_folder(minilm: Any) -> None:
    folder = minilm.model_dir
    assert folder.name == MODEL_DIR_NAME
    onnx = folder / "model.onnx"
    assert onnx.resolve() == packaged_model_file()
    assert onnx.is_symlink()
    from importlib.resources import files

    for name in TOKENIZER_FILES:
        assert (folder / name).read_bytes() == files("gitkb.core.data").joinpath(name).read_bytes()


def test_assemble_model_dir_repairs(tmp_path: Path) -> None:
    folder = assemble_model_dir(tmp_path)
    (folder / "model.onnx").unlink()
    os.symlink(tmp_path / "nowhere.onnx", folder / "model.onnx")
    (folder / "tokenizer_config.json").write_text("{}")
    assert assemble_model_dir(tmp_path) == folder
    assert (folder / "model.onnx").resolve() == packaged_model_file()
    assert json.loads((folder / "tokenizer_config.json").read_text())["model_max_length"] == 256
    assert sorted(p.name for p in folder.iterdir()) == sorted(["model.onnx", *TOKENIZER_FILES])


def test_minilm_embeds_offline(minilm: Any, offline: None) -> None:
    assert isinstance(minilm, Embedder)
    assert fingerprint(minilm) == "fastembed/all-minilm-l6-v2@384"
    assert minilm.max_input_tokens == 256
    texts = [
        "How do I reset my password?",
        "Steps to recover a forgotten login credential",
        "The giraffe is the tallest living land animal.",
    ]
    vecs = minilm.embed_batch(texts)
    assert [len(v) for v in vecs] == [384, 384, 384]
    assert all(isinstance(x, float) for x in vecs[0])
    assert np.allclose(np.linalg.norm(np.asarray(vecs), axis=1), 1.0, atol=1e-5)
    assert _cos(vecs[0], vecs[1]) > _cos(vecs[0], vecs[2]) + 0.2
    assert minilm.embed_batch([]) == []


def test_minilm_batch_order_and_consistency(minilm: Any, offline: None) -> None:
    texts = [("word " * n).strip() + f" item {n}" for n in (40, 1, 300, 7, 90, 2, 15, 60, 5, 33, 120)]
    together = minilm.embed_batch(texts)
    alone = [minilm.embed_batch([t])[0] for t in texts]
    for a, b in zip(together, alone, strict=True):
        assert _cos(a, b) > 0.9999


def test_minilm_tokens_and_clipping(minilm: Any, offline: None) -> None:
    long_text = "documentation " * 400
    counts = minilm.count_tokens(["hello world", long_text])
    assert counts[0] == 4  # [CLS] hello world [SEP]
    assert counts[1] > 256
    vecs, cost = embed_with_cost(minilm, ["hello world", long_text])
    assert len(vecs) == 2 and len(vecs[1]) == 384
    assert (cost.texts, cost.tokens) == (2, 4 + 256)


def test_minilm_thread_safe(minilm: Any, offline: None) -> None:
    texts = [f"concurrent sentence number {i} about chroma collections" for i in range(12)]
    expected = minilm.embed_batch(texts)
    results: list[list[list[float]]] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            results.append(minilm.embed_batch(texts))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for r in results:
        assert all(_cos(a, b) > 0.99999 for a, b in zip(r, expected, strict=True))


# ---------------------------------------------------------------------------------------------
# OpenAI-compatible provider against a local server


class _FakeOpenAI(BaseHTTPRequestHandler):
    backend = HashingEmbedder(dims=32)
    requests: list[dict[str, Any]] = []

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append({"path": self.path, "auth": self.headers.get("Authorization"), **body})
        if self.path != "/v1/embeddings":
            return self._send(404, {"error": {"message": "not found"}})
        if self.headers.get("Authorization") != "Bearer sk-test":
            return self._send(401, {"error": {"message": "bad key"}})
        texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
        vecs = self.backend.embed_batch(texts)
        data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vecs)]
        data.reverse()  # clients must order by index
        self._send(
            200,
            {
                "object": "list",
                "data": data,
                "model": body["model"],
                "usage": {"prompt_tokens": 1, "total_tokens": 1},
            },
        )

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        raw = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)


@pytest.fixture
def openai_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    _install_guard(monkeypatch, allow_loopback=True)
    _FakeOpenAI.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _FakeOpenAI)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_openai_compat_embeds(openai_server: str, tmp_path: Path) -> None:
    e = create_embedder(
        "OpenAI",
        "OpenAI/Text-Embedding-Local",
        cache_dir=tmp_path,
        options={"base_url": openai_server, "api_key": "sk-test", "batch_size": 2},
    )
    assert e.identity == "openai/text-embedding-local"
    texts = ["alpha beta", "gamma", "delta epsilon", "zeta", "eta"]
    vecs = e.embed_batch(texts)
    assert vecs == _FakeOpenAI.backend.embed_batch(texts)
    assert e.dims == 32
    assert fingerprint(e) == "openai/text-embedding-local@32"
    sent = _FakeOpenAI.requests
    assert [len(r["input"]) for r in sent] == [2, 2, 1]
    assert {r["model"] for r in sent} == {"Text-Embedding-Local"}  # sent as spelled, prefix stripped
    e.close()  # type: ignore[attr-defined]


def test_openai_compat_probes_dims(openai_server: str, tmp_path: Path) -> None:
    e = create_embedder(
        "openai", "m", cache_dir=tmp_path, options={"base_url": openai_server, "api_key": "sk-test"}
    )
    assert e.dims == 32
    assert len(_FakeOpenAI.requests) == 1


def test_openai_compat_errors(openai_server: str, tmp_path: Path) -> None:
    bad_key = create_embedder(
        "openai", "m", cache_dir=tmp_path, options={"base_url": openai_server, "api_key": "wrong", "dims": 32}
    )
    with pytest.raises(EmbeddingNotConfigured, match="API key"):
        bad_key.embed_batch(["x"])
    wrong_path = create_embedder(
        "openai", "m", cache_dir=tmp_path, options={"base_url": openai_server + "/nope", "api_key": "sk-test"}
    )
    with pytest.raises(EmbeddingNotConfigured):
        wrong_path.embed_batch(["x"])
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    down = create_embedder(
        "openai",
        "m",
        cache_dir=tmp_path,
        options={"base_url": f"http://127.0.0.1:{port}/v1", "retries": 0, "timeout_s": 2},
    )
    with pytest.raises(StoreUnavailable):
        down.embed_batch(["x"])


@pytest.mark.parametrize(
    "options", [{"batch_size": "many"}, {"batch_size": 0}, {"threads": 0}, {"threads": "x"}]
)
def test_fastembed_option_validation(options: dict[str, Any], tmp_path: Path) -> None:
    with pytest.raises(InvalidArgument):
        create_embedder("fastembed", None, cache_dir=tmp_path, options=options)


def fastembed_reference(model_dir: Path, texts: list[str], batch_size: int = 8) -> list[list[float]]:
    """What ``FastEmbedMiniLM.embed_batch`` gave when fastembed's ``TextEmbedding`` ran the model:
    texts sorted by length, groups of ``batch_size``, two intra-op threads."""
    from fastembed import TextEmbedding

    from gitkb.core.embedders.fastembed_minilm import register_custom_model

    model = TextEmbedding(
        register_custom_model(),
        cache_dir=str(model_dir.parent),
        threads=2,
        specific_model_path=str(model_dir),
        local_files_only=True,
    )
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    out: list[list[float]] = [[] for _ in texts]
    for start in range(0, len(order), batch_size):
        idx = order[start : start + batch_size]
        for i, v in zip(idx, model.embed([texts[i] for i in idx], batch_size=batch_size), strict=True):
            out[i] = v.tolist()
    return out


MIXED_TEXTS = [
    "how do I throttle a function",
    "What is the maximum timeout for a Lambda function?",
    "[MASK] what [CLS] is [SEP] x [PAD]",
    "Ünïcödé naïve café   spaced\tout\nlines",
    "日本語のテキスト と English",
    " ".join(f"word{i}" for i in range(400)),  # far over 256 tokens: clipped
    "x",
    *[("lorem ipsum " * n).strip() + f" item {n}" for n in (40, 1, 90, 7, 60, 2, 15, 33, 120, 5)],
]


def test_minilm_vectors_are_fastembeds_bit_for_bit_on_one_intra_op_thread(minilm: Any, offline: None) -> None:
    """One onnxruntime session with one intra-op thread, groups run side by side: the vectors of
    fastembed's own ``TextEmbedding`` (the way they were made before), bit for bit, in batches and
    for one query (``embed_query``, on the caller's thread)."""
    assert minilm.batch_size == 2  # the default: the least CPU per text (README, Performance)
    reference = fastembed_reference(minilm.model_dir, MIXED_TEXTS)
    assert minilm.embed_batch(MIXED_TEXTS) == reference
    kept = minilm.batch_size, minilm.threads
    try:  # a text's vector does not depend on the group it runs in
        for minilm.batch_size, minilm.threads in ((1, 1), (3, 2), (5, 3), (64, 2)):
            assert minilm.embed_batch(MIXED_TEXTS) == reference
    finally:
        minilm.batch_size, minilm.threads = kept
    exact = create_embedder(  # queries on the documents' graph: embed_query is embed_batch, bit for bit
        "fastembed", "all-minilm-l6-v2", cache_dir=minilm.model_dir.parent, options={"query_graph": "exact"}
    )
    assert exact.query_graph == "exact" and exact._query_session is None
    for t in MIXED_TEXTS:
        assert exact.embed_query(t) == minilm.embed_batch([t])[0], t
    assert minilm._session.get_session_options().intra_op_num_threads == 1
    assert len(minilm._tok.encode(MIXED_TEXTS[5]).ids) == 256
    with pytest.raises(InvalidArgument):
        minilm.embed_query(["a list"])


def test_minilm_concurrent_queries_and_batches_give_the_same_vectors(minilm: Any, offline: None) -> None:
    """One session and one tokenizer serve every thread at once (no lock): queries embedded while
    batches run on other threads give the vectors they give alone."""
    from concurrent.futures import ThreadPoolExecutor

    alone = {t: minilm.embed_query(t) for t in MIXED_TEXTS}
    batch_alone = minilm.embed_batch(MIXED_TEXTS)

    def queries(k: int) -> bool:
        return all(minilm.embed_query(t) == alone[t] for t in MIXED_TEXTS[k % 3 :: 2])

    def batches(_: int) -> bool:
        return bool(minilm.embed_batch(MIXED_TEXTS) == batch_alone)

    with ThreadPoolExecutor(6) as pool:
        done = [pool.submit(queries if k % 2 else batches, k) for k in range(12)]
        assert all(f.result() for f in done)
