"""Questions that ask for an amount: the page that states one beside the question's words first.

"What is the maximum number of forecasts that can be queried ..." is answered by a quota table
row ("Maximum number of forecasts that can be queried using the QueryForecast API | 10"), yet
BM25 and the embedder both rank the API reference pages about the same words as high. For a
question (``?`` at the end, or *what / which / how*) about an amount (``ask_pick.question_kind``:
how much / many / long, maximum, limit, size ...), each of the first ``DOCUMENTS`` documents of the
fused list gains ``WEIGHT`` x its best line's evidence: the share of the query's terms on a line
that also holds a number the question does not (half as much without a unit). Claims and other
statements are left alone.

Measured (hybrid, ``gitkb eval``; README "Ranking and ASK (issue 20)"): awsdocs dev R@1 0.65 ->
0.70, MRR@10 0.802 -> 0.829 (7 amount questions, one moved: aws-q022); the same at top_n 10; SciFact
train unchanged (no claim is a question). Weight 0.2 moved it only with lists 100 deep, 0.3-0.5 at
both depths; 3, 5 or 10 documents, and 1, 2, 3, 5 or all chunks of each, gave the same.

No I/O of its own: the few texts it reads come from the caller's ``read_texts``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import TypeVar

from gitkb.services.retrieval.ask_pick import numbers, question_kind
from gitkb.services.retrieval.fusion import Fused
from gitkb.services.retrieval.query_words import keyword_query
from gitkb.stores.keyword_schema import analyze

WEIGHT = 0.3
DOCUMENTS = 5
CHUNKS = 3  # read per document, its first in the fused list: the same figures as all of them, at
# most 15 texts (all of a document's hits: about 7 ms of Python per amount question with 100-deep lists)
_ASKING = re.compile(r"\?\s*$|\b(what|which|how)\b", re.IGNORECASE)
_DIGIT = re.compile(r"\d")

K = TypeVar("K", bound=Hashable)


def asks_amount(query: str) -> bool:
    """A question (not a claim) about an amount."""
    return bool(_ASKING.search(query)) and question_kind(query) == "amount"


def evidence(qterms: set[str], asked: set[str], text: str) -> float:
    """The best line of ``text``: the share of ``qterms`` it holds, when it also holds a number not
    in ``asked`` (x 0.5 when no such number carries a unit); 0 for a text without one."""
    if not qterms or not _DIGIT.search(text):
        return 0.0
    best = 0.0
    for line in text.split("\n"):
        if not _DIGIT.search(line):
            continue
        units = [unit for n, unit in numbers(line) if n not in asked]
        if not units:
            continue
        share = len(qterms.intersection(analyze(line))) / len(qterms)
        best = max(best, share * (1.0 if any(units) else 0.5))
        if best >= 1.0:
            break
    return best


def favour_amounts(
    query: str,
    fused: Sequence[Fused[K]],
    document_of: Mapping[K, Hashable],
    read_texts: Callable[[list[K]], Mapping[K, str]],
    *,
    weight: float = WEIGHT,
    documents: int = DOCUMENTS,
) -> list[Fused[K]]:
    """``fused`` (best first) with the first ``documents`` documents' chunks raised by ``weight`` x
    the best ``evidence`` of the document's first ``CHUNKS`` chunks (their texts from
    ``read_texts``, asked once), when ``query`` asks for an amount; else ``fused`` as is.
    Order is otherwise kept (a stable sort)."""
    if weight <= 0 or not fused or not asks_amount(query):
        return list(fused)
    qterms = set(analyze(keyword_query(query)))
    asked = {n for n, _ in numbers(query)}
    docs = list(dict.fromkeys(document_of[f.key] for f in fused))[:documents]
    read: dict[Hashable, list[K]] = {d: [] for d in docs}
    for f in fused:
        doc = document_of[f.key]
        if doc in read and len(read[doc]) < CHUNKS:
            read[doc].append(f.key)
    texts = read_texts([k for keys in read.values() for k in keys])  # one read of at most 15 texts
    best: dict[Hashable, float] = {}
    for doc, keys in read.items():
        best[doc] = max((evidence(qterms, asked, texts.get(k, "")) for k in keys), default=0.0)
    if not any(best.values()):
        return list(fused)
    out = [Fused(f.key, f.score + weight * best.get(document_of[f.key], 0.0), f.ranks) for f in fused]
    return sorted(out, key=lambda f: -f.score)
