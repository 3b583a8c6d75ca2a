"""ASK picks the sentence that carries the fact asked for, footnotes never repeat a location, and
question words don't drive keyword search (the examples of issue 20, on a small hand-made corpus)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gitkb import Workspace
from gitkb.services.evaluation.answers import answer_words, lead, lead_recall
from gitkb.services.retrieval.ask import AskConfig, pick_sentences, relevant, retrieve
from gitkb.services.retrieval.ask_meaning import meaning_of
from gitkb.services.retrieval.ask_pick import fact_score, numbers, question_kind
from gitkb.services.retrieval.query_words import keyword_query
from helpers import ok

DOCS = {
    "lambda/timeout.md": (
        "# Configuring function timeout\n\n"
        "Lambda runs your function for a set amount of time before stopping it. "
        "Load test your Lambda function to determine an optimum timeout value for your function. "
        "The default timeout is 3 seconds. The maximum allowed value is 900 seconds.\n\n"
        "A function that reaches the timeout is stopped and the invocation fails.\n"
    ),
    "lambda/memory.md": (
        "# Memory and computing power\n\n"
        "Memory is the amount of memory available to your Lambda function at runtime. "
        "You can configure memory between 128 MB and 10,240 MB in 1-MB increments.\n\n"
        "Lambda allocates CPU power in proportion to the amount of memory configured.\n"
    ),
    "lambda/vpc.md": (
        "# How do I connect a function to a VPC?\n\n"
        "How do I give my function access to a VPC? You can connect your function to a VPC. "
        "Lambda creates network interfaces for each combination of subnet and security group, "
        "and a function in a VPC needs more memory for the network interfaces it uses.\n\n"
        "## How do I remove a function from a VPC?\n\n"
        "How can I do it? Do I need to wait? You can do it from the console: I did it, you can do it too.\n"
    ),
    "lambda/concurrency.md": (
        "# Managing concurrency\n\n"
        "Concurrency is the number of requests that your function is serving at any given time. "
        "Reserved concurrency guarantees the maximum number of concurrent instances for the function "
        "and throttles the function when it is exceeded. To throttle a function, set its reserved "
        "concurrency to zero.\n"
    ),
    "lambda/limits.md": (
        "# Quotas\n\n"
        "The following table lists quotas for Lambda functions.\n\n"
        "| Resource | Quota |\n| --- | --- |\n"
        "| Function layers | 5 |\n"
        "| Deployment package size | 50 MB |\n"
        "| Environment variables | 4 KB |\n"
    ),
}


def _kb(ws: Workspace, root: Path) -> None:
    for rel, text in DOCS.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    assert ws.document_index("CREATE_INDEX", index_name="lambda", embeddings=False)["Success"]
    r = ws.document_index("ADD_DOCUMENTS", index_name="lambda", filepath=str(root), base_path=str(root))
    assert r["Success"], r


def _ask(ws: Workspace, q: str) -> dict[str, Any]:
    r = ws.document_index("ASK", query=q, index_name="lambda")
    assert r["Success"] and r["answered"], r
    for f in r["Footnotes"]:  # every quote verbatim at its location
        loc = f["location"]
        assert DOCS[f["filepath"]][loc["char_start"] : loc["char_end"]] == f["quote"]
    return r


def test_the_maximum_is_answered_with_the_number_and_its_unit(ws: Workspace, tmp_path: Path) -> None:
    _kb(ws, tmp_path / "kb")
    r = _ask(ws, "What is the maximum timeout for a Lambda function?")
    assert lead(r["Answer"]).strip() == "The maximum allowed value is 900 seconds."
    r = _ask(ws, "How much memory can a Lambda function have?")
    assert "128 MB and 10,240 MB" in lead(r["Answer"])
    r = _ask(ws, "What is the maximum deployment package size?")
    assert "50 MB" in lead(r["Answer"])


def test_a_yes_no_question_is_settled_first(ws: Workspace, tmp_path: Path) -> None:
    _kb(ws, tmp_path / "kb")
    r = _ask(ws, "Can I connect a function to a VPC?")
    assert lead(r["Answer"]).strip() == "You can connect your function to a VPC."


def test_question_words_do_not_drive_keyword_search(ws: Workspace, tmp_path: Path) -> None:
    _kb(ws, tmp_path / "kb")
    r = ws.document_index("SEARCH", query="how do I throttle a function", index_name="lambda", mode="keyword")
    assert r["Results"][0]["filepath"] == "lambda/concurrency.md", [h["filepath"] for h in r["Results"]]
    assert keyword_query("How do I resize c5d.12xlarge to 2 GB?") == "resize c5d.12xlarge to 2 GB"
    assert keyword_query("How do I?") == "How do I"  # nothing but question words: searched as given


def test_footnotes_never_repeat_a_location(ws: Workspace, tmp_path: Path) -> None:
    _kb(ws, tmp_path / "kb")
    r = _ask(ws, "What is the default and maximum timeout in seconds?")
    locs = [(f["filepath"], f["location"]["line_start"], f["location"]["line_end"]) for f in r["Footnotes"]]
    assert len(set(locs)) == len(locs), locs
    same_doc: dict[str, list[tuple[int, int]]] = {}
    for path, a, b in locs:  # no two ranges of one document overlap or touch
        for c, d in same_doc.get(path, []):
            assert b + 1 < c or d + 1 < a, locs
        same_doc.setdefault(path, []).append((a, b))
    timeout = [f for f in r["Footnotes"] if f["filepath"] == "lambda/timeout.md"]
    assert len(timeout) == 1 and "3 seconds" in timeout[0]["quote"] and "900 seconds" in timeout[0]["quote"]
    r = _ask(ws, "How many function layers, environment variables and package size?")
    rows = [f for f in r["Footnotes"] if f["filepath"] == "lambda/limits.md"]
    assert len(rows) == 1 and rows[0]["location"]["line_end"] > rows[0]["location"]["line_start"], rows


def test_question_kinds_and_numbers() -> None:
    assert question_kind("How long can a function run?") == "amount"
    assert question_kind("What is the limit on layers?") == "amount"
    assert question_kind("Does AMI support tags?") == "yes_no"
    assert question_kind("Which runtime do I pick?") == "other"
    assert numbers("c5d.12xlarge has 2 x 900 GB and 1\\.8 TB, 20-30% and 5") == [
        ("2", True),
        ("900", True),
        ("1.8", True),
        ("20", False),
        ("30", True),
        ("5", False),
    ]
    q = "What is the maximum storage for db.t2.medium?"
    assert fact_score("amount", q, "The maximum is 32 GiB.", 1.0) == (1.0, 0.2)
    assert fact_score("amount", q, "The maximum is 32.", 1.0) == (1.0, 0.1)
    assert fact_score("amount", q, "See the maximum storage.", 1.0) == (0.5, 0.0)
    assert fact_score("amount", "Is 5 the maximum?", "The maximum is 5.", 1.0) == (0.5, 0.0)  # asked already
    assert fact_score("yes_no", "Is it on?", "It is on.", 1.0) == (1.0, 0.2)
    assert fact_score("other", q, "Is it the maximum?", 1.0) == (1.0, -0.2)


def test_lead_recall_on_a_hand_made_set() -> None:
    assert answer_words("InnoDB \\(for version 10\\.2 and higher\\)") == {
        "innodb",
        "version",
        "10",
        "2",
        "higher",
    }
    assert lead("The maximum is 900 seconds. [1] Other text [2]") == "The maximum is 900 seconds. "
    assert lead("no marker at all") == "no marker at all"
    cases = [  # (answer, gold, expected)
        ("The maximum allowed value is 900 seconds\\. [1]", "900 seconds", 1.0),
        (
            "Load test your function. [1] The maximum is 900 seconds. [1]",
            "900 seconds",
            0.0,
        ),  # after the lead
        ("You can have 50 channels per account. [1]", "50 per account", 1.0),
        ("It is 50. [1]", "50 per account", 1 / 3),
        ("It is the holdout: 20\\-30% of the data. [1]", "20-30% of the training data", 0.75),
        ("Nothing relevant found in the indexes for this question.", "single-digit millisecond", 0.0),
    ]
    for answer, gold, want in cases:
        assert lead_recall(answer, gold) == want, (answer, gold)
    assert round(sum(lead_recall(a, g) for a, g, _ in cases) / len(cases), 4) == round((2.75 + 1 / 3) / 6, 4)
    assert lead_recall("Anything. [1]", "the") == 1.0 and lead_recall("[1]", "the") == 0.0  # stop words only


def test_meaning_scores_sentences_when_the_index_has_vectors(ws: Workspace, tmp_path: Path) -> None:
    _kb(ws, tmp_path / "kb")
    q = "How much memory can a Lambda function have?"
    passages, qterms, _ = retrieve(
        ws.ctx, q, index_name="lambda", indexes=None, top_n=10, mode=None, tenant=None
    )
    good = relevant(passages, AskConfig())
    by_words = pick_sentences(good, qterms, AskConfig(), question=q)
    liked = by_words[-1].text  # the meaning function prefers the last pick by words
    by_meaning = pick_sentences(
        good,
        qterms,
        AskConfig(),
        question=q,
        meaning=lambda texts: [4.0 if t == liked else 0.0 for t in texts],
    )
    assert by_words[0].text != liked and by_meaning[0].text == liked
    assert meaning_of(ws.ctx, q, good) is None  # a keyword-only index: words alone
    ok(ws.document_index("CREATE_INDEX", index_name="vec", embeddings=True))
    ok(ws.document_index("ADD_TEXT", index_name="vec", text=DOCS["lambda/timeout.md"], filepath="t.md"))
    ok(ws.build_embeddings())
    r = ws.document_index("ASK", query="What is the maximum timeout for a Lambda function?", index_name="vec")
    assert r["answered"] and "900 seconds" in lead(r["Answer"])
    vec_passages, _, _ = retrieve(ws.ctx, q, index_name="vec", indexes=None, top_n=5, mode=None, tenant=None)
    cos = meaning_of(ws.ctx, q, vec_passages)
    assert cos is not None and len(cos(["a", "b"])) == 2
