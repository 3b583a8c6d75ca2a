"""The int8 dynamic-quantization embedder (fastembed/all-minilm-l6-v2-qdyn): close to today's
vectors, its own identity, built once per model cache directory and reused by other processes."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gitkb.core.embedders import create_embedder, fingerprint, resolve_identity
from gitkb.core.embedders.fastembed_minilm import IDENTITY as TODAY
from gitkb.core.embedders.minilm_qdyn import IDENTITY, LOCK_NAME, MODEL_DIR_NAME, ensure_model_dir
from helpers import ok

SENTENCES = [
    "How do I reset my password?",
    "The maximum allowed timeout value for a Lambda function is 900 seconds.",
    "Steps to recover a forgotten login credential",
    "The giraffe is the tallest living land animal.",
    "Configure the bucket policy to deny unencrypted uploads",
    "Aspirin reduces the risk of a second heart attack in adults.",
]

# A child process: build (or reuse) the quantized graph in argv[1], print whether it built it.
CHILD = (
    "import sys, pathlib\n"
    "from gitkb.core.embedders.minilm_qdyn import ensure_model_dir\n"
    "d, built = ensure_model_dir(pathlib.Path(sys.argv[1]))\n"
    "print('built' if built else 'reused', flush=True)\n"
)


class NetworkBlocked(AssertionError):
    pass


def _block_network(mp: pytest.MonkeyPatch) -> None:
    """Only loopback and Unix sockets (a local catalog or vector server) may be reached."""
    real_connect, real_getaddrinfo = socket.socket.connect, socket.getaddrinfo

    def local(host: Any) -> bool:
        return isinstance(host, str) and (host in {"localhost", "::1"} or host.startswith("127."))

    def connect(self: socket.socket, address: Any) -> Any:
        if self.family == socket.AF_UNIX or local(address[0] if isinstance(address, tuple) else address):
            return real_connect(self, address)
        raise NetworkBlocked(f"network access attempted: connect {address!r}")

    def getaddrinfo(host: Any, *args: Any, **kw: Any) -> Any:
        if local(host):
            return real_getaddrinfo(host, *args, **kw)
        raise NetworkBlocked(f"network access attempted: getaddrinfo {host!r}")

    mp.setattr(socket.socket, "connect", connect)
    mp.setattr(socket, "getaddrinfo", getaddrinfo)


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any, Path]:
    """Today's embedder and the quantized one, in one fresh cache directory, network blocked."""
    cache = tmp_path_factory.mktemp("qdyn-cache")
    with pytest.MonkeyPatch.context() as mp:
        _block_network(mp)
        today = create_embedder("fastembed", "all-minilm-l6-v2", cache_dir=cache, options={})
        quant = create_embedder("fastembed", "all-minilm-l6-v2-qdyn", cache_dir=cache, options={})
    return today, quant, cache


def _cos(a: list[float], b: list[float]) -> float:
    x, y = np.asarray(a), np.asarray(b)
    return float(x @ y / (np.linalg.norm(x) * np.linalg.norm(y)))


def test_quantized_vectors_are_close_to_todays(
    pair: tuple[Any, Any, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    today, quant, _ = pair
    _block_network(monkeypatch)
    a, b = today.embed_batch(SENTENCES), quant.embed_batch(SENTENCES)
    cosines = [_cos(x, y) for x, y in zip(a, b, strict=True)]
    assert min(cosines) >= 0.98, cosines
    assert max(cosines) < 0.99999, "the quantized graph gives today's vectors: it was not quantized"
    assert np.allclose(np.linalg.norm(np.asarray(b), axis=1), 1.0, atol=1e-5)
    # still ranks by meaning: the paraphrase beats the unrelated sentence
    assert _cos(b[0], b[2]) > _cos(b[0], b[3]) + 0.2


def test_quantized_identity_differs(pair: tuple[Any, Any, Path]) -> None:
    today, quant, _ = pair
    assert quant.identity == IDENTITY == resolve_identity("FastEmbed", "fastembed/All-MiniLM-L6-v2-qdyn")
    assert today.identity == TODAY
    assert fingerprint(quant) == "fastembed/all-minilm-l6-v2-qdyn@384"
    assert fingerprint(quant) != fingerprint(today)
    assert quant.model_dir != today.model_dir
    assert (quant.model_dir / "model.onnx").is_file() and not (quant.model_dir / "model.onnx").is_symlink()
    assert quant.built  # the fixture's fresh cache: this embedder built the graph


def test_second_process_reuses_the_cached_graph(pair: tuple[Any, Any, Path]) -> None:
    _, quant, cache = pair
    graph = cache / MODEL_DIR_NAME / "model.onnx"
    before = graph.stat()
    out = subprocess.run(
        [sys.executable, "-c", CHILD, str(cache)], capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["reused"], out.stderr
    after = graph.stat()
    assert (after.st_ino, after.st_mtime_ns, after.st_size) == (
        before.st_ino,
        before.st_mtime_ns,
        before.st_size,
    )
    # and this process too: a second embedder on the same cache builds nothing
    again = create_embedder("fastembed", "all-minilm-l6-v2-qdyn", cache_dir=cache, options={})
    assert not again.built
    assert graph.stat().st_ino == before.st_ino


def test_two_processes_at_once_build_it_once(tmp_path: Path) -> None:
    procs = [
        subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path)], stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    results = sorted(p.communicate(timeout=300)[0].strip() for p in procs)
    assert [p.returncode for p in procs] == [0, 0]
    assert results == ["built", "reused"]
    folder = tmp_path / MODEL_DIR_NAME
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        [LOCK_NAME, "model.onnx", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"]
    )  # no temporary file left behind
    d, built = ensure_model_dir(tmp_path)
    assert (d, built) == (folder, False)


def test_a_workspace_switches_to_it_explicitly(
    make_ws: Any, kb_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A workspace embedded with today's model keeps it until told: `embeddings use` + `reembed`."""
    w = make_ws(embedding_provider="fastembed", embedding_model="all-minilm-l6-v2")  # today's model
    ok(w.document_index("CREATE_INDEX", index_name="kb"))
    ok(w.document_index("ADD_DOCUMENTS", index_name="kb", filepath=str(kb_copy / "docs")))
    ok(w.build_embeddings())
    n = ok(w.document_index("GET_INDICES_STATS"))["Stats"]["kb"]["chunk_count"]
    _block_network(monkeypatch)
    changed = ok(w.set_embedding_identity("fastembed", "all-minilm-l6-v2-qdyn"))
    assert (changed["identity"], changed["previous_identity"]) == (IDENTITY, TODAY)
    assert ok(w.document_index("GET_INDICES_STATS"))["Stats"]["kb"]["vectors"] == "stranded"
    ok(w.reembed("kb"))
    st = ok(w.embeddings_status())
    assert st["fingerprint"] == "fastembed/all-minilm-l6-v2-qdyn@384" and st["pending_embeddings"] == 0
    counts = {c["identity"]: c["count"] for c in st["collections"]}
    assert counts[IDENTITY] == n  # its own collection, beside the old one
    for query, target in (
        ("newcomer orientation schedule", "first-week.md"),
        ("how long may we hold on to client information", "data-retention.md"),
    ):
        sem = ok(w.document_index("SEARCH", query=query, mode="semantic", top_n=3))
        assert sem["mode"] == "semantic" and sem["Results"][0]["filepath"].endswith(target), sem
