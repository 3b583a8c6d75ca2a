"""Equal hits come back in the catalog's order, not in the order a store returns them (issue 20).

Pages with the same text score the same on both sides of a hybrid search; which one tantivy or
Chroma returns first is their own business (insertion into that store, segment layout), so two
nodes, or one keyword index before and after a rebuild, could answer the same query differently.
Fusion gives equal scores one rank and breaks the tie by the catalog's index, document and chunk
row: the order the pages were written in, the same for every node sharing the catalog.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from gitkb.services.retrieval.fusion import document_fusion

TEXT = (
    "# Rotating widgets\n\nA widget rotates at the speed its controller sets, within the widget's limits.\n"
)


def _order(make_ws: Callable[..., Any], home: Path, names: list[str]) -> list[str]:
    ws = make_ws(home)
    root = home.parent / f"{home.name}-docs"
    root.mkdir()
    assert ws.document_index("CREATE_INDEX", index_name="w")["Success"]
    for name in names:  # one ADD_DOCUMENTS each: this is the order the stores see them in
        (root / name).write_text(TEXT, encoding="utf-8")
        r = ws.document_index("ADD_DOCUMENTS", index_name="w", filepath=str(root / name), base_path=str(root))
        assert r["Success"], r
    assert ws.build_embeddings()["Success"]
    r = ws.document_index("SEARCH", query="how fast does a widget rotate", index_name="w", mode="hybrid")
    assert r["Success"] and r["mode"] == "hybrid", r
    scores = {h["score"] for h in r["Results"]}
    assert len(r["Results"]) == 3 and len(scores) == 1, r["Results"]  # the situation: all equal
    return [h["filepath"] for h in r["Results"]]


def test_equal_hits_come_in_the_catalogs_order(make_ws: Callable[..., Any], tmp_path: Path) -> None:
    assert _order(make_ws, tmp_path / "one", ["c.md", "b.md", "a.md"]) == ["c.md", "b.md", "a.md"]
    assert _order(make_ws, tmp_path / "two", ["b.md", "a.md", "c.md"]) == ["b.md", "a.md", "c.md"]


def test_equal_scores_share_a_rank_and_break_by_the_tie_key() -> None:
    lists = {"keyword": [("x", 2.0), ("y", 2.0), ("z", 1.0)], "semantic:m": [("y", 0.5), ("x", 0.5)]}
    doc = {"x": 1, "y": 2, "z": 3}
    plain = document_fusion(lists, doc, share=1.0)
    assert [f.key for f in plain] == ["x", "y", "z"]  # first appearance
    tied = document_fusion(lists, doc, share=1.0, tie={"x": "b", "y": "a", "z": "c"})
    assert [f.key for f in tied] == ["y", "x", "z"]
    assert tied[0].ranks == {"keyword": 1, "semantic:m": 1} and tied[1].ranks == {
        "keyword": 1,
        "semantic:m": 1,
    }
