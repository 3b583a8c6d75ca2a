"""``Context.caches``: what the services keep between calls, one typed field each (was ``extras``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest

from gitkb.services.context import Caches


def test_caches_fields_are_typed() -> None:
    """Every cache is a declared field with a real type; none is ``Any`` and there is no free-form bag."""
    fields = {f.name: str(f.type) for f in dataclasses.fields(Caches)}
    assert set(fields) == {
        "vectors",
        "embedding_worker",
        "embedders",
        "query_vectors",
        "vector_locks",
        "keywords_fed",
        "maintenance_at",
        "search_settings_toml",
        "search_pool",
        "text_vectors",
        "chunk_worker",
    }
    assert [n for n, t in fields.items() if t == "Any" or "Any |" in t] == []


def test_close_closes_the_vector_store_and_forgets_the_caches(make_ws: Callable[..., Any]) -> None:
    ws = make_ws()
    assert ws.document_index("CREATE_INDEX", index_name="kb")["Success"]
    assert ws.document_index("ADD_TEXT", index_name="kb", text="The launch checklist lives here.")["Success"]
    assert ws.build_embeddings()["Success"]
    sem = ws.document_index("SEARCH", query="launch checklist", mode="semantic")
    assert sem["Success"] and sem["mode"] == "semantic", sem
    ctx = ws.ctx
    assert not hasattr(ctx, "extras")
    store = ctx.vectors
    assert ctx.caches.vectors is store
    assert ctx.caches.query_vectors and ctx.caches.embedders  # the semantic search filled them
    store.heartbeat()
    ws.close()
    assert ctx.caches == Caches()  # forgotten, as a new Context would start
    with pytest.raises(Exception):  # noqa: B017 - the closed chroma client answers nothing
        store.heartbeat()
