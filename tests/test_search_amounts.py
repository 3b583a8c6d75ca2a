"""Hybrid search puts first the page that states an amount when a question asks for one (issue 20).

On a small real workspace (hashing embedder, keyword and vectors both real): the API page names
every word of the question, the quota page answers it with a number on the same line.
"""

from __future__ import annotations

from pathlib import Path

from gitkb import Workspace
from gitkb.services.retrieval import amounts
from gitkb.services.retrieval.fusion import Fused

DOCS = {
    "api.md": (
        "# Widget jobs API\n\nThe jobs API sets the timeout of a widget job, up to the maximum timeout.\n"
    ),
    "quotas.md": (
        "# Widget job quotas\n\n"
        "| Resource | Quota |\n| --- | --- |\n"
        "| Maximum timeout of a widget job | 900 seconds |\n"
    ),
}
# Pages about other things, so that both lists rank more than two pages (min-max needs a bottom).
DOCS |= {
    f"other{n}.md": f"# Topic {n}\n\nNotes on topic {n}: what a widget is, and how an account names its jobs.\n"
    for n in range(6)
}
QUESTION = "What is the maximum timeout of a widget job?"


def _kb(ws: Workspace, root: Path) -> None:
    root.mkdir(parents=True)
    for rel, text in DOCS.items():
        (root / rel).write_text(text, encoding="utf-8")
    assert ws.document_index("CREATE_INDEX", index_name="widgets")["Success"]
    r = ws.document_index("ADD_DOCUMENTS", index_name="widgets", filepath=str(root), base_path=str(root))
    assert r["Success"], r
    assert ws.build_embeddings()["Success"]


def _first(ws: Workspace, query: str, mode: str) -> str:
    r = ws.document_index("SEARCH", query=query, index_name="widgets", mode=mode)
    assert r["Success"] and r["mode"] == mode, r
    return str(r["Results"][0]["filepath"])


def test_an_amount_question_finds_the_page_with_the_number_first(ws: Workspace, tmp_path: Path) -> None:
    _kb(ws, tmp_path / "kb")
    assert _first(ws, QUESTION, "keyword") == "api.md"  # the words alone rank the API page first
    assert _first(ws, QUESTION, "hybrid") == "quotas.md"
    # A statement about the same amount is not a question: left as fused.
    claim = "The maximum timeout of a widget job is fixed."
    assert not amounts.asks_amount(claim)
    assert _first(ws, claim, "hybrid") == "api.md"


def test_evidence_wants_the_words_and_a_new_number_on_one_line() -> None:
    q = {"maximum", "widget", "group", "account"}
    assert amounts.evidence(q, set(), "| Widget groups per account | 50 |") == 0.75 * 0.5  # no unit
    assert amounts.evidence(q, set(), "| Widget groups per account | 50 MB |") == 0.75
    assert amounts.evidence(q, {"50"}, "Widget groups per account: 50") == 0.0  # the question's own number
    assert amounts.evidence(q, set(), "Widget groups per account\nare 50") == 0.0  # not on one line
    assert amounts.evidence(q, set(), "No number about widget groups here.") == 0.0


def test_favour_amounts_raises_only_the_first_documents() -> None:
    fused = [Fused("a", 0.9), Fused("b", 0.8), Fused("c", 0.7)]
    doc = {"a": 1, "b": 2, "c": 3}
    line = "widget groups per account: 10 items"  # 4 of the question's 5 terms (many, widget, group, per, account)
    text = {"a": "widget groups", "b": line, "c": line}
    got = amounts.favour_amounts(
        "How many widget groups per account?", fused, doc, lambda ks: text, documents=2
    )
    assert [f.key for f in got] == ["b", "a", "c"]  # c holds the best line but is not among the first 2
    same = amounts.favour_amounts("Widget groups per account are 10.", fused, doc, lambda ks: text)
    assert [f.key for f in same] == ["a", "b", "c"]


def test_favour_amounts_reads_the_first_chunks_of_a_document() -> None:
    line = "widget groups per account: 10 items"
    fused = [Fused("a", 0.9)] + [Fused(f"b{i}", 0.8) for i in range(amounts.CHUNKS + 1)]
    doc = {"a": 1} | {f"b{i}": 2 for i in range(amounts.CHUNKS + 1)}
    text = {k: "widget groups" for k in doc} | {f"b{amounts.CHUNKS}": line}  # past the chunks read
    asked: list[list[str]] = []

    def read(keys: list[str]) -> dict[str, str]:
        asked.append(keys)
        return {k: text[k] for k in keys}

    got = amounts.favour_amounts("How many widget groups per account?", fused, doc, read)
    assert got[0].key == "a"
    assert asked == [["a", *[f"b{i}" for i in range(amounts.CHUNKS)]]]  # one read, the first chunks only
    text[f"b{amounts.CHUNKS - 1}"] = line
    assert amounts.favour_amounts("How many widget groups per account?", fused, doc, read)[0].key == "b0"
