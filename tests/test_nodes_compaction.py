"""Change-log compaction and embedding identities (issue 18): the watermark of an identity no index is
bound to any more (its index re-embedded into another model, or deleted) stops holding compaction back;
one a stranded index is still bound to (a model change not re-embedded yet) keeps holding it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gitkb import Workspace
from gitkb.services.runtime import nodes
from gitkb.stores.catalog import changes
from helpers import ok

OLD = "vectors:hashing/old-model"
NEW = "vectors:hashing/new-model"
PIN = "vectors:hashing/pin"


def add(w: Workspace, index: str, name: str) -> None:
    ok(
        w.document_index(
            "ADD_TEXT", index_name=index, text=f"A note called {name} about compaction.", filepath=name
        )
    )


def marks(w: Workspace) -> dict[str, int]:
    return changes.watermarks(w.ctx.catalog.conn)


def test_an_identity_no_index_uses_stops_holding_compaction_back(make_ws: Callable[..., Any]) -> None:
    w: Workspace = make_ws(embedding_model="old-model")
    ok(w.document_index("CREATE_INDEX", index_name="kb"))
    for i in range(3):
        add(w, "kb", f"a{i}.md")
    ok(w.build_embeddings())
    old_mark = marks(w)[OLD]
    assert old_mark == changes.head(w.ctx.catalog.conn)
    # the model changes: kb is stranded, still bound to the old identity, which keeps holding the log
    ok(w.set_embedding_identity("hashing", "new-model"))
    for i in range(3):
        add(w, "kb", f"b{i}.md")
    ok(w.build_embeddings())
    out = nodes.compact(w.ctx)
    assert out["compacted"] and out["floor"] <= old_mark, out
    # kb is re-embedded into the new identity: nothing is bound to the old one any more
    ok(w.reembed("kb"))
    add(w, "kb", "c0.md")
    ok(w.build_embeddings())
    assert marks(w)[OLD] == old_mark  # nobody moves it again
    out = nodes.compact(w.ctx)
    head = changes.head(w.ctx.catalog.conn)
    assert out["removed"] > 0 and out["floor"] > old_mark and out["floor"] == head - 1, (out, old_mark, head)


def test_a_deleted_index_identity_stops_holding_compaction_back(make_ws: Callable[..., Any]) -> None:
    w: Workspace = make_ws()
    ok(w.document_index("CREATE_INDEX", index_name="kb"))
    ok(
        w.document_index(
            "CREATE_INDEX", index_name="pinned", embedding_provider="hashing", embedding_model="pin"
        )
    )
    add(w, "pinned", "p0.md")
    add(w, "kb", "k0.md")
    ok(w.build_embeddings())
    pin_mark = marks(w)[PIN]
    ok(w.document_index("DELETE_INDEX", index_name="pinned"))  # the only index of identity hashing/pin
    for i in range(3):
        add(w, "kb", f"k{i + 1}.md")
    ok(w.build_embeddings())
    assert marks(w)[PIN] == pin_mark
    out = nodes.compact(w.ctx)
    head = changes.head(w.ctx.catalog.conn)
    assert out["floor"] > pin_mark and out["floor"] == head - 1, (out, pin_mark, head)


def test_a_catch_up_that_started_before_a_model_change_leaves_the_stranded_watermark(
    make_ws: Callable[..., Any],
) -> None:
    """The background embedder picks the identities to catch up, then the model changes before it
    reads the log: its catch-up of the now stranded identity must not move that identity's watermark
    past entries it never applied (a switch back resumes from it; compaction is held back by it)."""
    from gitkb.services.derived.vectors_catchup import catch_up_identity  # a test-only peek at the round

    w: Workspace = make_ws(embedding_model="old-model")
    ok(w.document_index("CREATE_INDEX", index_name="kb"))
    add(w, "kb", "a0.md")
    ok(w.build_embeddings())
    old_mark = marks(w)[OLD]
    ok(w.set_embedding_identity("hashing", "new-model"))
    for i in range(3):
        add(w, "kb", f"b{i}.md")
    ok(w.build_embeddings())
    catch_up_identity(
        w.ctx, OLD.removeprefix("vectors:")
    )  # what the late round of the background thread does
    assert marks(w)[OLD] == old_mark, (marks(w), old_mark, changes.head(w.ctx.catalog.conn))
    out = nodes.compact(w.ctx)
    assert out["floor"] <= old_mark, (out, old_mark)
