"""ASK reads more than one page: at most ``PER_DOCUMENT`` passages of a document (issue 20).

A long guide whose many short chunks all rank above the one page that holds the answer used to fill
every passage ASK read; the answer page was never read, so never quoted nor cited.
"""

from __future__ import annotations

from pathlib import Path

from gitkb import Workspace
from gitkb.services.evaluation.answers import lead
from gitkb.services.retrieval.ask import DEFAULT_TOP_N, PER_DOCUMENT, per_document

SECTION = (
    "## Turning widgets {n}\n\n"
    "Widget rotation speed matters: the rotation speed of a widget sets how the widget turns, and "
    "a widget rotation speed that is too high is the maximum risk.\n"
)
GUIDE = "# Widget guide\n\n" + "\n".join(SECTION.format(n=n) for n in range(1, 15))
LIMITS = (
    "# Widget quotas\n\n"
    "This page lists quotas that apply to an account, the Regions they hold in, how to ask for an "
    "increase through the console, which quotas are fixed, and how the service reports usage against "
    "each of them over time, with examples of alarms that warn before a quota is reached. "
    "The maximum rotation speed of a widget is 300 rpm. "
    "Other quotas cover the number of widget groups per account, the size of a widget template, "
    "the number of tags on a widget, the length of a widget name and the number of concurrent jobs.\n"
)


def _kb(ws: Workspace, root: Path) -> None:
    root.mkdir(parents=True)
    (root / "guide.md").write_text(GUIDE, encoding="utf-8")
    (root / "limits.md").write_text(LIMITS, encoding="utf-8")
    assert ws.document_index("CREATE_INDEX", index_name="widgets", embeddings=False)["Success"]
    r = ws.document_index(
        "ADD_DOCUMENTS", index_name="widgets", filepath=str(root), base_path=str(root), chunk_size=48
    )
    assert r["Success"], r


def test_ask_reads_the_answer_page_below_a_page_of_many_chunks(ws: Workspace, tmp_path: Path) -> None:
    _kb(ws, tmp_path / "kb")
    q = "What is the maximum rotation speed of a widget?"
    hits = ws.document_index("SEARCH", query=q, index_name="widgets", top_n=30)
    paths = [h["filepath"] for h in hits["Results"]]
    # The situation: the guide's chunks fill the first top_n hits, the answer page comes after them.
    assert paths[:DEFAULT_TOP_N] == ["guide.md"] * DEFAULT_TOP_N
    assert "limits.md" in paths
    r = ws.document_index("ASK", query=q, index_name="widgets")
    assert r["Success"] and r["answered"], r
    assert "limits.md" in [f["filepath"] for f in r["Footnotes"]]
    assert lead(r["Answer"]).strip() == "The maximum rotation speed of a widget is 300 rpm."


def test_per_document_keeps_order_and_caps_each_document() -> None:
    hits = [{"index_id": "i", "file_id": d, "n": n} for n, d in enumerate("aaaaabaaca")]
    got = per_document(hits, 4, 3)
    assert [(h["file_id"], h["n"]) for h in got] == [("a", 0), ("a", 1), ("a", 2), ("b", 5)]
    assert [h["n"] for h in per_document(hits, 100, 6)] == [0, 1, 2, 3, 4, 5, 6, 8]  # the 7th and 8th a out
    assert PER_DOCUMENT < DEFAULT_TOP_N
