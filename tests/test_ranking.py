"""Ranking choices of issue 5, pinned by behaviour (the scores they reach are in README "Performance"):
score fusion and its settings (gitkb.toml, per-index override), what the model reads for a chunk
(title and heading path, windows pooled for a chunk over the model's window) and the content key a
vector is reused under. Real SQLite, tantivy and Chroma; the fast ``hashing`` embedder."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gitkb import Workspace
from gitkb.services.derived import embedding_inputs
from gitkb.services.derived.embedding_inputs import EMBED_CONTEXT, context_path, embedding_input
from gitkb.services.retrieval import fusion
from gitkb.services.retrieval.fusion import document_fusion, rrf, score_fusion
from helpers import ok


@pytest.fixture
def ws(make_ws: Callable[..., Workspace]) -> Workspace:
    w = make_ws(embedding_model="rank-h", embedding_options={"max_input_tokens": 200})
    w.ctx.embedding_worker.close()
    return w


# -- fusion -------------------------------------------------------------------------------------


def test_score_fusion_normalises_each_list_and_weights_them() -> None:
    lists = {
        "keyword": [("a", 30.0), ("b", 20.0), ("c", 10.0)],
        "semantic:x/y": [("c", 0.9), ("d", 0.5), ("a", 0.1)],
    }
    fused = score_fusion(lists, weights={"keyword": 0.5, "semantic": 0.5})
    got = {f.key: round(f.score, 6) for f in fused}
    assert got == {"a": 0.5, "b": 0.25, "c": 0.5, "d": 0.25}
    assert [f.key for f in fused] == ["a", "c", "b", "d"]  # ties: best single rank, then first seen
    assert fused[1].ranks == {"keyword": 3, "semantic:x/y": 1} and fused[1].retrievers == [
        "keyword",
        "semantic",
    ]
    semantic_heavy = score_fusion(lists, weights={"keyword": 0.2, "semantic": 0.8})
    assert semantic_heavy[0].key == "c"
    # One item, or equal scores: each gets the full weight; duplicates count once at their best rank.
    assert [(f.key, f.score) for f in score_fusion({"k": [("a", 3.0), ("a", 1.0)]})] == [("a", 1.0)]
    assert score_fusion({}) == [] and score_fusion({"k": []}) == []


def test_document_fusion_gives_a_chunk_its_documents_best_evidence() -> None:
    lists = {
        "keyword": [("a1", 30.0), ("b1", 20.0), ("c1", 10.0)],
        "semantic:x/y": [("b2", 0.9), ("c1", 0.5), ("a1", 0.1)],
    }
    doc = {"a1": "A", "b1": "B", "b2": "B", "c1": "C"}
    weights = {"keyword": 0.5, "semantic": 0.5}
    plain = document_fusion(lists, doc, weights=weights, share=0.0)
    assert [(f.key, f.score) for f in plain] == [
        (f.key, f.score) for f in score_fusion(lists, weights=weights)
    ]
    # page B: b1 matches the words (0.5 normalised), b2 the meaning (1.0); each now counts both
    full = {f.key: round(f.score, 6) for f in document_fusion(lists, doc, weights=weights, share=1.0)}
    assert full == {"b1": 0.75, "b2": 0.75, "a1": 0.5, "c1": 0.25}
    half = document_fusion(lists, doc, weights=weights, share=0.5)
    assert [f.key for f in half] == ["b2", "a1", "b1", "c1"]  # a1 and b1 tie at 0.5: a1 ranked first
    with pytest.raises(ValueError):
        document_fusion(lists, doc, share=1.5)


def test_measured_defaults_are_pinned() -> None:
    assert fusion.DEFAULT_FUSION == "score" and fusion.DEFAULT_SEMANTIC_WEIGHT == 0.4
    assert fusion.DOCUMENT_SHARE == 1.0
    assert EMBED_CONTEXT is True and embedding_inputs.POOL_WINDOWS is False
    assert [f.key for f in rrf({"k": ["a", "b"], "s": ["b", "a"]})] == ["a", "b"]


def _hybrid(w: Workspace, **kw: Any) -> dict[str, Any]:
    return ok(
        w.document_index("SEARCH", query="rotate the signing keys", index_name="kb", mode="hybrid", **kw)
    )


def _seed(w: Workspace, settings: dict[str, Any] | None = None) -> None:
    from gitkb.services.indexing.indexes import create_index

    create_index(w.ctx, "kb", settings=settings)
    for i, text in enumerate(
        [
            "Rotate the signing keys every 90 days.",
            "Keys are rotated by the scheduler.",
            "Failover moves the primary.",
            "Signing uses Ed25519.",
        ]
    ):
        ok(w.document_index("ADD_TEXT", index_name="kb", text=text, filepath=f"d{i}.txt"))
    ok(w.build_embeddings())


def test_fusion_method_and_weight_come_from_settings(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "gitkb.toml").write_text('[search]\nfusion = "score"\nsemantic_weight = 1.0\n')
    w = Workspace(tmp_path / "ws", embedding_provider="hashing", embedding_model="rank-h")
    try:
        _seed(w)
        res = _hybrid(w)["Results"]
        # Score fusion with all weight on the semantic list: the order is the semantic order, scores in [0, 1].
        sem = ok(
            w.document_index("SEARCH", query="rotate the signing keys", index_name="kb", mode="semantic")
        )["Results"]
        assert [r["id"] for r in res if "semantic" in r["retrievers"]] == [r["id"] for r in sem][: len(res)]
        assert res[0]["score"] == 1.0 and all(0.0 <= r["score"] <= 1.0 for r in res)
    finally:
        w.close()


def test_index_settings_override_the_workspace_fusion(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "gitkb.toml").write_text('[search]\nfusion = "score"\n')
    w = Workspace(tmp_path / "ws", embedding_provider="hashing", embedding_model="rank-h")
    try:
        _seed(w, settings={"search": {"fusion": "rrf", "rrf_k": 10}})
        res = _hybrid(w)["Results"]
        # RRF with k=10: a hit found by both lists scores at most 2/11, one list alone at most 1/11.
        assert max(r["score"] for r in res) <= 2 / 11 + 1e-9
        both = [r for r in res if len(r["retrievers"]) == 2]
        assert both and all(
            abs(r["score"] - sum(1 / (10 + k) for k in r["ranks"].values())) < 1e-6 for r in both
        )
    finally:
        w.close()


# -- what the model reads -----------------------------------------------------------------------


def test_embedding_input_adds_the_context_the_text_lacks() -> None:
    assert (
        embedding_input("Body text.", "Guide", ["Guide", "Setup", "Keys"])
        == "Guide > Setup > Keys\n\nBody text."
    )
    # A chunk that starts at its own heading repeats only the path above it; the page's first chunk nothing.
    assert (
        embedding_input("## Keys\n\nRotate them.", "Guide", ["Guide", "Setup", "Keys"])
        == "Guide > Setup\n\n## Keys\n\nRotate them."
    )
    assert (
        embedding_input("# Guide<a name='g'></a>\n\nIntro.", "Guide", ["Guide"])
        == "# Guide<a name='g'></a>\n\nIntro."
    )
    assert embedding_input("Study of X\n\nAbstract.", "Study of X", []) == "Study of X\n\nAbstract."
    assert embedding_input("Plain.", None, []) == "Plain."
    assert context_path("text", "  A   title ", ["a title", "Sub"]) == ["A title", "Sub"]


def test_chunk_over_the_model_window_is_clipped_by_default(ws: Workspace) -> None:
    ok(ws.document_index("CREATE_INDEX", index_name="kb", chunk_strategy="one_chunk_per_doc"))
    text = " ".join(f"Sentence {i} talks about topic{i} and subject{i}." for i in range(120))
    ok(ws.document_index("ADD_TEXT", index_name="kb", text=text, filepath="long.txt"))
    built = ok(ws.build_embeddings())
    assert built["cost"]["texts"] == 1 and built["chunks_clipped"] == 1


def test_chunk_over_the_model_window_is_embedded_as_pooled_windows(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(embedding_inputs, "POOL_WINDOWS", True)
    from gitkb.core.chunking import chunk_text
    from gitkb.core.embedders.hashing import HashingEmbedder
    from gitkb.core.models import ChunkConfig
    from gitkb.services.derived.embedding_inputs import POOL_OVERLAP, POOL_WINDOW

    ok(ws.document_index("CREATE_INDEX", index_name="kb", chunk_strategy="one_chunk_per_doc"))
    text = " ".join(f"Sentence {i} talks about topic{i} and subject{i}." for i in range(120))
    ok(
        ws.document_index(
            "ADD_TEXT", index_name="kb", text=text, filepath="long.txt", metadata={"title": "Long one"}
        )
    )
    built = ok(ws.build_embeddings())
    windows = [w.text for w in chunk_text(text, ChunkConfig("sentence", POOL_WINDOW, POOL_OVERLAP))]
    assert len(windows) >= 3
    assert built["cost"]["texts"] == len(windows) and built["chunks_clipped"] == 0  # the whole chunk was read
    emb = HashingEmbedder("rank-h", max_input_tokens=200)
    parts = np.asarray(emb.embed_batch([embedding_input(w, "Long one", []) for w in windows]))
    want = parts.mean(axis=0) / np.linalg.norm(parts.mean(axis=0))
    identity = ws.ctx.vectors.list_collections()[0]["identity"]
    cid = ws.ctx.catalog.conn.execute("SELECT rowid FROM chunks").fetchone()[0]
    got = np.asarray(ws.ctx.vectors.get_vectors(identity, [str(cid)])[str(cid)])
    assert np.allclose(got, want, atol=1e-5)


def test_vectors_are_reused_only_for_the_same_model_input(ws: Workspace) -> None:
    ok(ws.document_index("CREATE_INDEX", index_name="kb"))
    same = "## Limits\n\nThe quota is 100 requests per second."
    ok(
        ws.document_index(
            "ADD_TEXT", index_name="kb", text=same, filepath="a.txt", metadata={"title": "Service A"}
        )
    )
    assert ok(ws.build_embeddings())["chunks_embedded"] == 1
    # Same text and title elsewhere: reused. Same text under another title: the model reads another input.
    ok(
        ws.document_index(
            "ADD_TEXT", index_name="kb", text=same, filepath="copy/a.txt", metadata={"title": "Service A"}
        )
    )
    again = ok(ws.build_embeddings())
    assert again["chunks_embedded"] == 0 and again["chunks_reused"] == 1
    ok(
        ws.document_index(
            "ADD_TEXT", index_name="kb", text=same, filepath="b.txt", metadata={"title": "Service B"}
        )
    )
    assert ok(ws.build_embeddings())["chunks_embedded"] == 1
