"""ASK's candidate-sentence vectors come from an LRU cache keyed by (identity, text): a question
asked again embeds nothing, and its answers are those of a cold cache (the real offline model)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from gitkb import Workspace
from gitkb.services.derived.identity import embedder_for
from gitkb.services.retrieval.semantic import TEXT_CACHE_SIZE
from helpers import ok

QUESTIONS = (
    "How long are customer records kept?",
    "How long are passwords?",
    "How do I rotate the payments gateway API keys?",
    "When do API keys expire?",
    "How long do tokens of service accounts live?",
)


def answer(w: Workspace, q: str) -> tuple[Any, Any]:
    r = ok(w.document_index("ASK", query=q, index_name="kb"))
    return r.get("Answer"), [(f["filepath"], f["location"]) for f in r.get("Footnotes", [])]


def test_ask_sentence_vectors_are_cached_and_answers_unchanged(
    make_ws: Callable[..., Workspace], kb_copy: Path
) -> None:
    w = make_ws(embedding_provider=None, embedding_model=None)  # the default: fastembed MiniLM
    ok(w.document_index("CREATE_INDEX", index_name="kb"))
    ok(w.document_index("ADD_DOCUMENTS", index_name="kb", filepath=str(kb_copy / "docs")))
    ok(w.build_embeddings())
    emb: Any = embedder_for(w.ctx, "fastembed/all-minilm-l6-v2")
    batches: list[list[str]] = []
    real = emb.embed_batch

    def counting(texts: list[str]) -> list[list[float]]:
        batches.append(list(texts))
        return real(texts)

    emb.embed_batch = counting
    cold = {}
    for q in QUESTIONS:  # each one alone, as before the cache: every candidate in one batch
        w.ctx.caches.text_vectors.clear()
        batches.clear()
        cold[q] = answer(w, q)
        assert cold[q][0] and len(batches) == 1, q
        assert len(w.ctx.caches.text_vectors) == len(set(batches[0]))
    w.ctx.caches.text_vectors.clear()
    for q in QUESTIONS:
        answer(w, q)
    batches.clear()
    for q in QUESTIONS:  # asked again: nothing embedded, the same answers
        assert answer(w, q) == cold[q], q
    assert batches == []
    assert TEXT_CACHE_SIZE == 4096
