"""The default model's int8 query graph (``core/embedders/minilm_query.py``), with the real model.

What it checks: a query's vector on the int8 graph is the documents' graph's vector up to rounding
(every awsdocs dev question and 200 SciFact claims at cosine >= 0.999), documents keep their graph
bit for bit, the graph is built once per cache and rebuilt for another source, a build that cannot
be written falls back to the documents' graph and says so in ``gitkb status`` (library, CLI, HTTP),
the setting is validated where it is read, and a workspace's searches use the graph it names.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from gitkb import Workspace
from gitkb.core.config import load_settings
from gitkb.core.embedders import fastembed_minilm as fm
from gitkb.core.embedders import minilm_query
from gitkb.core.embedders.registry import create_embedder
from gitkb.core.errors import InvalidArgument
from helpers import ok

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
IDENTITY = "fastembed/all-minilm-l6-v2"


def _queries() -> list[str]:
    aws = [json.loads(line)["question"] for line in (DATA / "awsdocs" / "questions.dev.jsonl").open()]
    claims = [json.loads(line)["text"] for line in (DATA / "scifact" / "queries.train.jsonl").open()]
    return aws + claims[:200]


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("query-graph-cache")


@pytest.fixture(scope="module")
def int8(cache: Path) -> Any:
    return create_embedder("fastembed", "all-minilm-l6-v2", cache_dir=cache, options={})


@pytest.fixture(scope="module")
def exact(cache: Path) -> Any:
    return create_embedder("fastembed", "all-minilm-l6-v2", cache_dir=cache, options={"query_graph": "exact"})


def test_query_vectors_match_the_documents_graph_up_to_rounding(int8: Any, exact: Any) -> None:
    assert int8._query_session is None  # loaded by the first query, not by a documents-only embedder
    queries = _queries()
    int8.embed_query(queries[0])
    assert int8.query_graph == "int8" and int8.query_graph_error is None and int8._query_session is not None
    assert len(queries) >= 200
    cos = []
    for q in queries:
        a, b = np.array(int8.embed_query(q)), np.array(exact.embed_query(q))
        assert abs(float(np.linalg.norm(a)) - 1.0) < 1e-5
        cos.append(float(a @ b))
    assert min(cos) >= 0.999, min(cos)
    assert float(np.mean(cos)) >= 0.9995
    assert any(c < 1.0 - 1e-6 for c in cos)  # it is a different graph, not the same one twice


def test_documents_keep_their_graph_bit_for_bit(int8: Any, exact: Any) -> None:
    texts = _queries()[:12] + ["a longer passage " * 40]
    assert int8.embed_batch(texts) == exact.embed_batch(texts)
    assert exact.embed_query(texts[0]) == exact.embed_batch([texts[0]])[0]


def test_the_graph_is_built_once_per_source_and_is_smaller(int8: Any, cache: Path) -> None:
    """The file is named after its source file and builder: a second embedder reuses it; the graph
    holds int8 weights (MatMulNBits and the word-piece table as int8), a quarter of the fp32 bytes."""
    import onnx

    folder = int8.model_dir
    graphs = sorted(folder.glob("query-int8-*.onnx"))
    assert [g.name for g in graphs] == [minilm_query.graph_name(fm.packaged_model_file())]
    before = graphs[0].stat().st_mtime_ns
    again = create_embedder("fastembed", "all-minilm-l6-v2", cache_dir=cache, options={})
    again.embed_query("a second embedder's first query")
    assert again.query_graph == "int8" and again._query_session is not None
    assert graphs[0].stat().st_mtime_ns == before
    m = onnx.load(str(graphs[0]))
    ops = [n.op_type for n in m.graph.node]
    assert ops.count("MatMulNBits") == 36 and "MatMul" in ops  # attention's activation products stay fp32
    fp32_weights = sum(
        int(np.prod(i.dims)) for i in m.graph.initializer if i.data_type == onnx.TensorProto.FLOAT
    )
    assert fp32_weights < 1_000_000  # biases, norms, scales: every weight matrix and table is int8
    other = folder.parent / "other-source.onnx"
    other.write_bytes(fm.packaged_model_file().read_bytes())
    assert minilm_query.graph_name(other) != graphs[0].name


def test_a_graph_of_an_earlier_source_is_removed_when_the_new_one_is_built(tmp_path: Path) -> None:
    folder = tmp_path / fm.MODEL_DIR_NAME
    folder.mkdir(parents=True)
    stale = folder / "query-int8-000000000000.onnx"
    stale.write_bytes(b"an earlier graph")
    emb = create_embedder("fastembed", "all-minilm-l6-v2", cache_dir=tmp_path, options={})
    assert stale.exists()  # nothing is built before a query
    emb.embed_query("rotate the database password")
    assert not stale.exists()
    assert [g.name for g in folder.glob("query-int8-*.onnx")] == [
        minilm_query.graph_name(fm.packaged_model_file())
    ]


def test_a_graph_that_cannot_be_written_falls_back_and_says_so(tmp_path: Path) -> None:
    """A directory where the graph file goes: the build fails, queries run on the documents' graph
    (bit for bit), and the embedder, the library's status, the CLI and HTTP all say why."""
    folder = tmp_path / "models" / fm.MODEL_DIR_NAME
    folder.mkdir(parents=True)
    (folder / minilm_query.graph_name(fm.packaged_model_file())).mkdir()
    emb = create_embedder("fastembed", "all-minilm-l6-v2", cache_dir=tmp_path / "models", options={})
    q = "What is the maximum timeout of a Lambda function?"
    assert emb.embed_query(q) == emb.embed_batch([q])[0]
    assert emb.query_graph == "exact" and emb._query_session is None
    assert emb.query_graph_error and "Error" in emb.query_graph_error

    home = tmp_path / "ws"
    folder2 = home / "models" / fm.MODEL_DIR_NAME
    folder2.mkdir(parents=True)
    (folder2 / minilm_query.graph_name(fm.packaged_model_file())).mkdir()
    with Workspace(home, embedding_provider=None, embedding_model=None) as w:
        ok(w.document_index("CREATE_INDEX", index_name="kb", embeddings=False))
        ok(
            w.document_index(
                "ADD_TEXT", index_name="kb", text="Lambda allows 900 seconds at most.", filepath="a.md"
            )
        )
        from gitkb.services.derived.identity import embedder_for

        assert ok(w.get_index_status())["query_embedding"] == {"configured": "int8", "loaded": {}}
        embedder_for(w.ctx, IDENTITY).embed_query("how long may a Lambda function run?")
        view = ok(w.get_index_status())["query_embedding"]
        assert view["configured"] == "int8"
        assert view["loaded"][IDENTITY]["graph"] == "exact" and view["loaded"][IDENTITY]["error"]


def test_the_setting_is_validated_where_it_is_read(tmp_path: Path, make_client: Callable[..., Any]) -> None:
    (tmp_path / "gitkb.toml").write_text('[embedding]\nquery_graph = "fp16"\n')
    with pytest.raises(InvalidArgument, match=r"\[embedding\] query_graph must be one of int8, exact"):
        load_settings(tmp_path)
    (tmp_path / "gitkb.toml").write_text('[embedding]\nquery_graph = "exact"\n')
    assert load_settings(tmp_path).embed_query_graph == "exact"
    assert load_settings(tmp_path, env={"GITKB_EMBEDDING_QUERY_GRAPH": "int8"}).embed_query_graph == "int8"
    with pytest.raises(InvalidArgument, match="GITKB_EMBEDDING_QUERY_GRAPH"):
        load_settings(tmp_path, env={"GITKB_EMBEDDING_QUERY_GRAPH": "fast"})
    with pytest.raises(InvalidArgument, match="query_graph must be one of"):
        create_embedder(
            "fastembed", "all-minilm-l6-v2", cache_dir=tmp_path / "m", options={"query_graph": "x"}
        )
    from gitkb.cli.main import cli

    assert CliRunner().invoke(cli, ["--home", str(tmp_path / "h2"), "init"]).exit_code == 0
    res = CliRunner().invoke(
        cli,
        ["--json", "status"],
        env={"GITKB_HOME": str(tmp_path / "h2"), "GITKB_EMBEDDING_QUERY_GRAPH": "fast"},
    )
    assert res.exit_code != 0 and "GITKB_EMBEDDING_QUERY_GRAPH" in res.output
    http = make_client('[embedding]\nquery_graph = "exact"\n', at=tmp_path / "h3")
    r = http.get("/status")
    assert r.status_code == 200 and r.json()["query_embedding"]["configured"] == "exact"


@pytest.mark.parametrize("graph", ["int8", "exact"])
def test_a_workspace_searches_with_the_graph_it_names(
    graph: str, make_ws: Callable[..., Workspace], kb_copy: Path, tmp_path: Path
) -> None:
    """SEARCH's query vector comes from the configured graph (library); `gitkb status --json` in
    another process reports it (HTTP: the setting test)."""
    from gitkb.services.derived.identity import embedder_for
    from gitkb.services.retrieval.semantic import query_key

    w = make_ws(embedding_provider=None, embedding_model=None, embed_query_graph=graph)
    ok(w.document_index("CREATE_INDEX", index_name="kb"))
    ok(w.document_index("ADD_DOCUMENTS", index_name="kb", filepath=str(kb_copy / "docs")))
    ok(w.build_embeddings())
    q = "how do I rotate the database password"
    ok(w.document_index("SEARCH", query=q, mode="semantic"))
    emb: Any = embedder_for(w.ctx, IDENTITY)
    cached = w.ctx.caches.query_vectors[query_key(IDENTITY, q)]
    batch = emb.embed_batch([q])[0]
    assert (cached == batch) is (graph == "exact")
    assert float(np.array(cached) @ np.array(batch)) > 0.999
    assert ok(w.get_index_status())["query_embedding"] == {
        "configured": graph,
        "loaded": {IDENTITY: {"graph": graph, "error": None}},
    }
    env = {**os.environ, "GITKB_EMBEDDING_QUERY_GRAPH": graph}
    out = subprocess.run(
        [sys.executable, "-m", "gitkb.cli.main", "--home", str(w.home), "--json", "status"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["query_embedding"]["configured"] == graph
